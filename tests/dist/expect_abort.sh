#!/usr/bin/env bash
# expect_abort.sh LIMIT_S -- MPIEXEC_COMMAND... (ending in the abort_probe binary)
# Runs the abort probe job with a fresh message and passes when the job ends within LIMIT_S seconds (no hung
# ranks), with a non-zero status, and rank 1's message appears exactly once, prefixed "[rank 1/3] ".
set -u
limit=$1
shift 2
message="abort_probe: rank 1 gives up on purpose (token $$)"
start_ns=$(date +%s%N)
output=$(timeout --kill-after=5 "$limit" "$@" "$message" 2>&1)
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
echo "$output"
echo "exit status $rc after $elapsed_ms ms"
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0"; fail=1; }
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "FAIL: still running after $limit s: the other ranks hung"; fail=1; }
count=$(grep -c -F -- "$message" <<<"$output")
[ "$count" -eq 1 ] || { echo "FAIL: the message appears $count times, expected once"; fail=1; }
grep -q -F -- "[rank 1/3] $message" <<<"$output" || { echo "FAIL: no line '[rank 1/3] $message'"; fail=1; }
[ $fail -eq 0 ] && echo "PASS"
exit $fail

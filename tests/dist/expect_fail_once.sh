#!/usr/bin/env bash
# expect_fail_once.sh LIMIT_S TEXT -- COMMAND...
# Runs COMMAND (an mpiexec job) in a fresh temporary directory and passes when the job ends within LIMIT_S
# seconds (no hung rank), with a non-zero status, with TEXT (a fixed string) exactly once in its output, and
# with no file left behind.
set -u
limit=$1 text=$2
shift 3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
start_ns=$(date +%s%N)
output=$(timeout --kill-after=5 "$limit" "$@" 2>&1)
rc=$?
elapsed_ms=$(( ($(date +%s%N) - start_ns) / 1000000 ))
echo "$output"
echo "exit status $rc after $elapsed_ms ms"
fail=0
[ "$rc" -ne 0 ] || { echo "FAIL: the job exited 0"; fail=1; }
[ "$rc" -ne 124 ] && [ "$rc" -ne 137 ] || { echo "FAIL: still running after $limit s: a rank hung"; fail=1; }
count=$(grep -c -F -- "$text" <<<"$output")
[ "$count" -eq 1 ] || { echo "FAIL: '$text' appears $count times, expected once"; fail=1; }
left=$(find . -mindepth 1 | head)
[ -z "$left" ] || { echo "FAIL: files left behind: $left"; fail=1; }
[ $fail -eq 0 ] && echo "PASS"
exit $fail

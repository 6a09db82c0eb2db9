#!/usr/bin/env bash
# catalogue_run.sh RANKS BINARY ARGS... : runs one catalogue entry (under mpiexec when RANKS > 1) in a fresh
# directory with metrics=m.jsonl, and checks the seeds' printout: the [cfg] table with the binary's seed keys,
# memory lines at steps 0 and 1 for every phase, the [done] line, and a done record with every rank's snapshots.
set -u
ranks=$1 binary=$2
shift 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
launch=()
if [ "$ranks" -gt 1 ]; then
  launch=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec -n "$ranks" --oversubscribe)
fi
timeout 900 "${launch[@]}" "$binary" "$@" metrics=m.jsonl >out.txt 2>err.txt
rc=$?
cat out.txt err.txt
fail=0
[ "$rc" -eq 0 ] || { echo "FAIL: exit code $rc"; fail=1; }
expect() { grep -E -q -- "$1" out.txt || { echo "FAIL: no line matches /$1/"; fail=1; }; }
expect '^\[cfg\] seed [0-9]{3}, step '
expect '^\[cfg\] run config$'
expect "^  devices +\\| $ranks \\(ranks\\)$"
expect '^  act_ckpt +\| (true|false) \(this binary\)$'
expect '^  precision +\| [0-9a-z-]+ \(this binary\)$'
for step in 0 1; do
  for phase in before_fwd after_fwd after_bwd after_opt; do
    expect "^  step $step micro [0-9]+ \\[$phase\\] Params .* \\| Grads .* \\| Optim .* \\| Acts .* \\| Allocated .* \\(peak .*\\) \\| Reserved "
  done
done
expect '^\[done\] train time: [0-9.]+ s \| peak memory: [0-9.]+ GiB'
grep -q '"event":"done"' m.jsonl || { echo "FAIL: no done record in m.jsonl"; fail=1; }
records=$(grep '"event":"memory"' m.jsonl | grep '"phase":"after_opt"' | grep -c '"step":1}')
[ "$records" -eq "$ranks" ] || { echo "FAIL: $records after_opt records of step 1, expected one per rank ($ranks)"; fail=1; }
[ $fail -eq 0 ] && echo "PASS"
exit $fail

#!/usr/bin/env bash
# predict.out_of_memory_two_ranks: FullShard on 2 ranks under a max_memory= that step 0 exceeds. The job must end with a
# non-zero exit within seconds of the out-of-memory (no rank left waiting in a collective), print the report once, and
# leave no metrics file.
# usage: oom_ranks.sh MPIEXEC BINARY
set -uo pipefail
mpiexec=$1 binary=$2
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT; cd "$d"
start=$(date +%s)
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 120 "$mpiexec" -n 2 --oversubscribe \
  "$binary" batch_size=8 seq_len=128 threads=1 max_steps=2 max_memory=80MiB metrics=m.jsonl > out.txt 2>&1
rc=$?
took=$(( $(date +%s) - start ))
cat out.txt
echo "exit $rc after ${took} s"
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || { echo "the job did not end with an error (exit $rc)"; exit 1; }
[ "$took" -le 60 ] || { echo "the job took ${took} s to end"; exit 1; }
grep -q 'out of memory on rank [01] in the ' out.txt || { echo "no out-of-memory report"; exit 1; }
[ ! -e m.jsonl ] && [ -z "$(ls -d m.jsonl.partial* 2>/dev/null)" ] || { echo "a metrics file was left behind"; exit 1; }
echo "the job ended in ${took} s with the report"

#!/usr/bin/env bash
# metrics_disk_full.sh BINARY FIXTURE
# A metrics file that stops growing mid-run (a full disk; here the file size limit of the running process is
# lowered with prlimit once the file exists, SIGXFSZ ignored so that write() fails with EFBIG) ends the run at
# that step: exit 1, the setting named, and neither the metrics file nor save_dir left behind.
set -u
binary=$1 fixture=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
"$fixture" model m && "$fixture" tokens t.bin 4000 || { echo "setup failed"; exit 1; }
# Many steps: were write errors ignored, the run would still be going when the timeout ends it.
(trap '' XFSZ && exec timeout 120 "$binary" model_dir=m data=t.bin batch_size=2 seq_len=16 max_steps=1000000 threads=1 \
   memory_every=1 metrics=m.jsonl save_dir=s > >(cat >out.txt) 2> >(cat >err.txt)) &
pid=$!  # timeout's; the binary is its child. Output goes through cat, whose files the limit does not cover.
for _ in $(seq 600); do [ -s "$(ls m.jsonl.partial-* 2>/dev/null | head -1)" ] && break; sleep 0.05; done
target=$(pgrep -P "$pid" -f -- "^$binary" | head -1)
prlimit --pid "$target" --fsize=1:unlimited || { echo "prlimit failed"; exit 1; }
wait "$pid"
rc=$?
for _ in $(seq 100); do [ -s err.txt ] && break; sleep 0.05; done
cat err.txt
fail=0
[ "$rc" -eq 1 ] || { echo "FAIL: exit code $rc, expected 1"; fail=1; }
grep -q "^error: metrics=m.jsonl: cannot write line [0-9]* to m.jsonl.partial-[0-9]*: File too large" err.txt ||
  { echo "FAIL: message"; fail=1; }
left=$(ls -A | grep -v -x -E 'm|t.bin|out.txt|err.txt')
[ -z "$left" ] || { echo "FAIL: files left behind: $left"; fail=1; }
[ $fail -eq 0 ] && echo PASS
exit $fail

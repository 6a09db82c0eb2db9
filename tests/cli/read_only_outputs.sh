#!/usr/bin/env bash
# read_only_outputs.sh BINARY FIXTURE
# save_dir= and metrics= inside a directory the run may not write to are refused before the first step
# (exit 2, the setting named), and nothing is created. Root may write anywhere, so as root the binary runs
# as the unprivileged user nobody (setpriv), from a copy it can execute, or else against a read-only bind mount.
# Exit 77 (a skip) when neither can be arranged.
set -u
binary=$1 fixture=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
chmod 755 "$work"
cd "$work" || exit 1
"$fixture" model m && "$fixture" tokens t.bin 4000 || { echo "setup failed"; exit 1; }
mkdir ro && chmod 555 ro
run=("$binary")
if [ "$(id -u)" -eq 0 ]; then
  cp "$binary" ./bin && chmod 755 ./bin
  run=(setpriv --reuid=65534 --regid=65534 --clear-groups ./bin)
  # nobody must be able to load the binary's libraries (LibTorch lives in the checkout's .venv): when the
  # checkout is not readable by others, make ro/ read-only for root instead, in a mount namespace of its own.
  if ! "${run[@]}" --help >/dev/null 2>&1; then
    if unshare --mount true 2>/dev/null; then
      run=(unshare --mount sh -c 'mount --bind -o ro ro ro && exec "$0" "$@"' "$binary")
    else
      echo "SKIP: as root, neither the user nobody nor a mount namespace can make ro/ read-only here"
      exit 77
    fi
  fi
fi
fail=0
for setting in save_dir=ro/out metrics=ro/run.jsonl; do
  "${run[@]}" model_dir=m data=t.bin batch_size=2 seq_len=16 max_steps=2 threads=1 "$setting" >out.txt 2>err.txt
  rc=$?
  cat err.txt
  [ "$rc" -eq 2 ] || { echo "FAIL: $setting: exit code $rc, expected 2"; fail=1; }
  grep -q -- "^error: $setting: cannot write in directory ro" err.txt || { echo "FAIL: $setting: message"; fail=1; }
  grep -q "^step " out.txt && { echo "FAIL: $setting: training started"; fail=1; }
  [ -z "$(ls -A ro)" ] || { echo "FAIL: $setting: files left in ro/"; ls -A ro; fail=1; }
done
[ $fail -eq 0 ] && echo PASS
exit $fail

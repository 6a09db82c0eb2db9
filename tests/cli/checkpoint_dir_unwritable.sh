#!/usr/bin/env bash
# checkpoint_dir_unwritable.sh BINARY FIXTURE
# A checkpoint_dir the run cannot write in is refused before step 1 (exit 2, "checkpoint_dir=DIR: " and the system's
# reason), leaving no metrics file and the directory as it was; once it trained every step and then failed at the
# first checkpoint (exit 1, no save_dir, no metrics). Two ways a directory becomes unwritable even for root: a
# read-only mount (a bind mount in a mount namespace of the run's own) and the immutable attribute (chattr +i).
# Each is skipped where it cannot be arranged; exit 77 (a skip) when neither can.
set -u
binary=$1 fixture=$2
work=$(mktemp -d)
cleanup() { chattr -i "$work/immutable" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
cd "$work" || exit 1
"$fixture" model m || { echo "setup failed"; exit 1; }
args=(model_dir=m batch_size=2 seq_len=16 threads=1 predict=false max_steps=20 metrics=m.jsonl save_dir=sv)
fail=0 ran=0
check() {  # check NAME DIR REASON COMMAND...: runs COMMAND with checkpoint_dir=DIR and checks the refusal
  local name=$1 dir=$2 reason=$3
  shift 3
  before=$(ls -A "$dir")
  "$@" "${args[@]}" checkpoint_dir="$dir" >out.txt 2>err.txt
  local rc=$?
  cat err.txt
  [ "$rc" -eq 2 ] || { echo "FAIL: $name: exit code $rc, expected 2"; fail=1; }
  grep -q -- "^error: checkpoint_dir=$dir: rank 0 cannot create a file there (.*$reason" err.txt ||
    { echo "FAIL: $name: the message does not name the directory and '$reason'"; fail=1; }
  grep -q "^step " out.txt && { echo "FAIL: $name: training started"; fail=1; }
  [ -e m.jsonl ] || [ -e sv ] && { echo "FAIL: $name: a metrics file or save_dir was left"; fail=1; }
  [ "$(ls -A "$dir")" = "$before" ] || { echo "FAIL: $name: the directory changed"; fail=1; }
  ran=$((ran + 1))
}
mkdir ro && touch ro/keep
if unshare --mount true 2>/dev/null; then
  check read_only_mount ro "Read-only file system" \
    unshare --mount sh -c 'mount --bind ro ro && mount -o remount,bind,ro ro && exec "$0" "$@"' "$binary"
else
  echo "skip: no mount namespace for a read-only mount"
fi
mkdir immutable
if chattr +i immutable 2>/dev/null; then
  check immutable immutable "Operation not permitted" "$binary"
  chattr -i immutable
else
  echo "skip: this file system has no immutable attribute"
fi
[ "$ran" -eq 0 ] && { echo "SKIP: neither a read-only mount nor chattr +i can be arranged here"; exit 77; }
[ $fail -eq 0 ] && echo PASS
exit $fail

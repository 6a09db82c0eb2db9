#!/usr/bin/env bash
# expect.sh RC REGEX SETUP -- COMMAND...
# Runs SETUP (shell text, may be empty) then COMMAND in a fresh temporary directory, and passes when
# COMMAND exits with RC, its stderr matches REGEX, and it left no new file behind (no partial output).
set -u
want_rc=$1 regex=$2 setup=$3
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
eval "$setup" || { echo "setup failed: $setup"; exit 1; }
before=$(find . | sort)
timeout 120 "$@" >stdout.txt 2>stderr.txt
rc=$?
after=$(find . | grep -v -E '^\./(stdout|stderr)\.txt$' | sort)
cat stderr.txt
fail=0
[ "$rc" -eq "$want_rc" ] || { echo "FAIL: exit code $rc, expected $want_rc"; fail=1; }
grep -E -q -- "$regex" stderr.txt || { echo "FAIL: stderr does not match /$regex/"; fail=1; }
if [ "$before" != "$after" ]; then
  echo "FAIL: files left behind:"; diff <(echo "$before") <(echo "$after"); fail=1
fi
[ $fail -eq 0 ] && echo "PASS"
exit $fail

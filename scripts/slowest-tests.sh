#!/usr/bin/env bash
# slowest-tests.sh BUILD [N]: the N (default 15) slowest tests of BUILD's last ctest run, slowest first, with their
# wall time and result, from ctest's log of that run (BUILD/Testing/Temporary/LastTest.log).
set -euo pipefail
log=${1:?usage: slowest-tests.sh BUILD [N]}/Testing/Temporary/LastTest.log
n=${2:-15}
[ -f "$log" ] || { echo "slowest-tests.sh: no $log (ctest has not run in $1)"; exit 0; }
echo "the $n slowest tests of the last ctest run ($log):"
awk '/^[0-9]+\/[0-9]+ Testing: / { name = substr($0, index($0, "Testing: ") + 9) }
     /^Test time = / { time = $4 }
     /^Test (Passed|Failed)/ { sub(/\.$/, "", $2); printf "%9.2f s  %-6s  %s\n", time, $2, name }' "$log" |
  sort -rn | awk -v n="$n" 'NR <= n'  # awk reads to the end: head would close the pipe on sort (SIGPIPE, pipefail)

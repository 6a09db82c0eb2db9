#!/usr/bin/env bash
# fuzz.sh [SECONDS]: the fuzz targets of tests/fuzz (tests/fuzz/README.md), built with clang (libFuzzer, ASan, UBSan)
# into build-fuzz/ against the main build's libtessera.a (scripts/test.sh builds it first). Each target
#   1. re-runs every input in tests/fuzz/regressions/<target>/ (crashes found earlier: they must pass now);
#   2. fuzzes for SECONDS (default 30) from a copy of its seed corpus tests/fuzz/corpus/<target>/, with a 2 GiB
#      RSS limit, a 512 MiB limit on any one allocation (a header claiming 10^12 elements must be refused before
#      allocating) and 10 s per input.
# A crash is saved as build-fuzz/crashes/<target>-crash-<sha1> and printed in base64 (up to 64 KiB); copy it into
# tests/fuzz/regressions/<target>/ once fixed. Prints each target's executions, coverage (libFuzzer's cov: edges and
# ft: features) and corpus size. The targets run side by side, one per core.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-30}
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found; scripts/install-deps.sh installs clang"; exit 1; }
cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DTESSERA_BUILD=build >/dev/null
cmake --build build-fuzz
mkdir -p build-fuzz/crashes
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0:allocator_may_return_null=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
# The canary first: a planted overflow that must be found, or nothing below would mean anything.
canary_dir=$(mktemp -d)
if build-fuzz/canary_overflow -max_total_time=60 -artifact_prefix="$canary_dir/" "$canary_dir" > build-fuzz/canary.log 2>&1 ||
   ! grep -q "heap-buffer-overflow" build-fuzz/canary.log; then
  echo "fuzz.sh: the planted overflow (tests/fuzz/canary_overflow.cpp) was not found; see build-fuzz/canary.log"; exit 1
fi
echo "canary_overflow: the planted heap overflow was found (AddressSanitizer's report: build-fuzz/canary.log)"
rm -rf "$canary_dir"
# One target: its regressions, then SECONDS of fuzzing; prints its line and returns non-zero on a failure.
fuzz_one() {
  local name=$1 binary=build-fuzz/$1 regressions=tests/fuzz/regressions/$1 corpus status=0
  if [ -d "$regressions" ] && [ -n "$(ls -A "$regressions")" ]; then
    if ! "$binary" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 "$regressions"/* > "build-fuzz/$name.regressions.log" 2>&1; then
      echo "$name: a regression input fails again (build-fuzz/$name.regressions.log)"; return 1
    fi
  fi
  corpus=$(mktemp -d)
  cp -r "tests/fuzz/corpus/$name/." "$corpus/"
  if "$binary" -max_total_time="$seconds" -rss_limit_mb=2048 -malloc_limit_mb=512 -timeout=10 -print_final_stats=1 \
       -artifact_prefix="build-fuzz/crashes/$name-" "$corpus" > "build-fuzz/$name.log" 2>&1; then
    local runs last cov ft files
    runs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "build-fuzz/$name.log" | grep -o '[0-9]*$')
    last=$(grep -E '^#[0-9]+' "build-fuzz/$name.log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*$' || true)
    ft=$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*$' || true)
    files=$(ls "$corpus" | wc -l)
    echo "$name: ${runs:-?} inputs in ${seconds} s, cov ${cov:-?} edges, ft ${ft:-?} features, corpus $files files, no crash"
  else
    status=1
    echo "$name: FOUND A CRASH (build-fuzz/$name.log):"
    grep -E "INFO: Seed|ERROR|runtime error|terminate|what\(\)|==[0-9]+==|Test unit written" "build-fuzz/$name.log" | head -8
    # The input itself, so that a crash seen only in a CI log can be replayed: base64 -d > x; build-fuzz/$name x
    local artifact
    artifact=$(grep -o 'Test unit written to .*' "build-fuzz/$name.log" | tail -1 | sed 's/^Test unit written to //')
    if [ -n "$artifact" ] && [ -f "$artifact" ] && [ "$(stat -c %s "$artifact")" -le 65536 ]; then
      echo "the input, base64:"; base64 -w 120 "$artifact"
    fi
  fi
  rm -rf "$corpus"
  return $status
}
# The targets run side by side, one per core (TESSERA_FUZZ_JOBS to change it); each prints when all have ended, in
# order, and a failed one leaves build-fuzz/<target>.failed.
jobs_max=${TESSERA_FUZZ_JOBS:-$(nproc)}
names=()
for target in tests/fuzz/fuzz_*.cpp; do
  name=$(basename "$target" .cpp)
  names+=("$name")
  rm -f "build-fuzz/$name.failed"
  while [ "$(jobs -rp | wc -l)" -ge "$jobs_max" ]; do wait -n || true; done
  { fuzz_one "$name" > "build-fuzz/$name.summary" 2>&1 || touch "build-fuzz/$name.failed"; } &
done
wait
failed=()
for name in "${names[@]}"; do
  cat "build-fuzz/$name.summary"
  [ -e "build-fuzz/$name.failed" ] && failed+=("$name")
done
if [ ${#failed[@]} -gt 0 ]; then echo "fuzz.sh: ${#failed[@]} target(s) failed: ${failed[*]}"; exit 1; fi
echo "fuzz.sh: every target ran ${seconds} s without a crash"

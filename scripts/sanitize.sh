#!/usr/bin/env bash
# sanitize.sh: the sanitized unit tests (tests/fuzz/CMakeLists.txt, ctest label `sanitize` in build-fuzz/): the
# Catch2 cases of the file formats, tokenizers, token files, paths and training-state checkpoints, built with clang's
# AddressSanitizer and UndefinedBehaviorSanitizer (any report fails the run), against the main build's libtessera.a
# for the rest (scripts/test.sh builds it first). Runs them in one process; `ctest --test-dir build-fuzz -L sanitize`
# runs them one by one.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang++ >/dev/null || { echo "sanitize.sh: clang++ not found; scripts/install-deps.sh installs clang"; exit 1; }
cmake -S tests/fuzz -B build-fuzz -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DTESSERA_BUILD=build >/dev/null
cmake --build build-fuzz
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1} \
  build-fuzz/tessera_sanitized_tests

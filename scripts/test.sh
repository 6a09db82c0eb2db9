#!/usr/bin/env bash
# The whole test suite from nothing: install, build everything, run ctest (unit, cli, reference, compile,
# consumer, train_state tests), then the sanitized unit tests (scripts/sanitize.sh) and every fuzz target for
# TESSERA_FUZZ_SECONDS each (default 10; scripts/fuzz.sh). Exits non-zero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_EXAMPLES=ON \
      -DTESSERA_BUILD_BENCH=ON >/dev/null
cmake --build build
# The 15 slowest tests are printed at the end, passed or not (ctest's own log of this run: build/Testing/Temporary).
status=0
(cd build && ctest --output-on-failure -j "$(nproc)") || status=$?
bash scripts/slowest-tests.sh build 15
[ "$status" -eq 0 ] || exit "$status"
bash scripts/sanitize.sh
bash scripts/fuzz.sh "${TESSERA_FUZZ_SECONDS:-10}"

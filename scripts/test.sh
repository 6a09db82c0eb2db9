#!/usr/bin/env bash
# The whole test suite from nothing: install, build everything, run ctest (unit, cli, reference, compile,
# consumer tests). Exits non-zero when anything fails.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=ON -DTESSERA_BUILD_EXAMPLES=ON \
      -DTESSERA_BUILD_BENCH=ON >/dev/null
cmake --build build
cd build
ctest --output-on-failure -j "$(nproc)"

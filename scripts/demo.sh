#!/usr/bin/env bash
# The main job from nothing: install what the build needs, build the demo, and train the tiny Llama on synthetic
# tokens under several policies side by side, then the tiny BLIP-2 on synthetic captioned images (arguments are
# passed on as key=value overrides).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh build
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_BUILD_TESTS=OFF -DTESSERA_BUILD_BENCH=OFF >/dev/null
cmake --build build --target tessera-demo
exec build/examples/tessera-demo "$@"

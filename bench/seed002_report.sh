#!/usr/bin/env bash
# Seed 002's single-GPU progression on its tiny variants (every catalogue step with model=tiny, a few steps each) into
# one tessera-report page, and a PNG of it drawn by headless Chromium: docs/images/seed002_report.png.
# usage: bench/seed002_report.sh BUILD_DIR OUT_DIR      (writes OUT_DIR/*.jsonl, report.html, seed002_report.png)
set -euo pipefail
build=$(cd "$1" && pwd); mkdir -p "$2"; out=$(cd "$2" && pwd)
steps="baseline reduced-batch grad-accum bf16-true bf16-mixed larger-model even-larger xxl-batch1 sgd adam8bit act-ckpt
       cpu-offload lora qlora"
cd "$out"
files=()
for s in $steps; do
  launch=("$build/catalogue/seed002-$s")
  # ZeRO-2 offload is the seed's two-GPU step.
  [ "$s" = cpu-offload ] && launch=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpiexec -n 2
                                    --oversubscribe "$build/catalogue/seed002-$s")
  "${launch[@]}" model=tiny max_steps=6 max_epochs=1 threads=1 memory_every=1 metrics="$out/$s.jsonl" > "$out/$s.log"
  files+=("$s.jsonl")
done
"$build/examples/tessera-report" -o report.html --title "Seed 002 on tiny models: from out-of-memory to fitting" "${files[@]}"
chrome=$(command -v chromium || command -v chromium-browser)
"$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$out/.chrome" \
  --window-size=1700,1300 --screenshot="$out/seed002_report.png" "file://$out/report.html" > /dev/null 2>&1
rm -rf "$out/.chrome"
echo "$out/report.html, $out/seed002_report.png"

#!/usr/bin/env bash
# report.renders_in_chromium: three tiny runs (one rank in fp32; one rank with the optimizer offloaded to host memory;
# FullShard on two ranks) -> tessera-report -> a headless Chromium screenshot, which must show every memory segment's
# colour and every run's loss line (check_report_png.py), and a page with one bar group per rank of the job.
# usage: report_renders.sh EXAMPLES_DIR REPORT_BIN MPIEXEC PYTHON [SHOT_OUT]
set -euo pipefail
examples=$1 report=$2 mpiexec=$3 python=$4 keep=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$chrome" ] || { echo "no chromium on PATH: install Debian's chromium (scripts/install-deps.sh does)"; exit 1; }
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT; cd "$d"
common="model=tiny max_steps=4 batch_size=2 seq_len=64 threads=1 memory_every=1"
"$examples/llama-fp32" $common metrics=fp32.jsonl > /dev/null
"$examples/llama-offload-bf16true" $common metrics=offload.jsonl > /dev/null
OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "$mpiexec" -n 2 --oversubscribe \
  "$examples/llama-fsdp-fp32" $common metrics=fsdp-2ranks.jsonl > /dev/null
"$report" -o page.html --title "tessera report test" fp32.jsonl offload.jsonl fsdp-2ranks.jsonl
# The page: 4 phases x (1 + 1 + 2 ranks) bars, the 2-rank run's second rank among them, a table row per run.
grep -q 'data-run="2" data-rank="1" data-phase="after_opt"' page.html
[ "$(grep -o '<tr><td><span class="swatch"' page.html | wc -l)" -eq 3 ]
"$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$d/profile" \
  --window-size=1400,1500 --screenshot="$d/shot.png" "file://$d/page.html" > chrome.log 2>&1 ||
  { cat chrome.log; exit 1; }
[ -z "$keep" ] || cp shot.png "$keep"
"$python" "$here/check_report_png.py" shot.png 40 \
  '#4e79a7=params' '#f28e2b=grads' '#59a14f=optimizer' '#e15759=activations' '#9c755f=host' \
  '#1f77b4=loss run 0' '#d62728=loss run 1' '#2ca02c=loss run 2'

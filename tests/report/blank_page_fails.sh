#!/usr/bin/env bash
# The negative control of report.renders_in_chromium: a screenshot of a page without the charts (the same title and
# legend text, no SVG) must fail check_report_png.py. Exit 0 when it does.
# usage: blank_page_fails.sh PYTHON
set -euo pipefail
python=$1
here=$(cd "$(dirname "$0")" && pwd)
chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
[ -n "$chrome" ] || { echo "no chromium on PATH: install Debian's chromium (scripts/install-deps.sh does)"; exit 1; }
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT; cd "$d"
printf '<!DOCTYPE html><html><body><h1>tessera runs</h1><p>Memory by phase</p></body></html>\n' > page.html
"$chrome" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$d/profile" \
  --window-size=1400,1500 --screenshot="$d/shot.png" "file://$d/page.html" > chrome.log 2>&1
if "$python" "$here/check_report_png.py" shot.png 40 '#4e79a7=params' '#e15759=activations' '#1f77b4=loss run 0'; then
  echo "check_report_png.py passed a page without charts"; exit 1
fi
echo "a page without charts is refused, as it must be"

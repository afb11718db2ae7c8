#!/usr/bin/env bash
# Renders an HTML report in headless Chromium, with every network feature
# off (the report must open without network): the whole report as a PDF
# (report.pdf: every section, every plot), one PNG per page of it
# (report-page-N.png, when pdftoppm is installed), and the first screen as
# OUT.png.
# Usage: screenshot.sh REPORT.html OUT.png [WIDTH,HEIGHT]
set -euo pipefail
html=$(readlink -f "$1"); out=$(readlink -f "$(dirname "$2")")/$(basename "$2"); size=${3:-1400,1800}
dir=$(dirname "$out"); base=$(basename "$out" .png)
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run
  --disable-background-networking --disable-component-update --disable-sync
  --disable-default-apps --user-data-dir="$profile" --hide-scrollbars)
chromium "${flags[@]}" --window-size="$size" --screenshot="$out" "file://$html" >/dev/null 2>&1
[ -s "$out" ] || { echo "screenshot failed: $out is empty" >&2; exit 1; }
chromium "${flags[@]}" --no-pdf-header-footer --print-to-pdf="$dir/$base.pdf" "file://$html" >/dev/null 2>&1
[ -s "$dir/$base.pdf" ] || { echo "screenshot failed: $dir/$base.pdf is empty" >&2; exit 1; }
echo "$out"
echo "$dir/$base.pdf"
if command -v pdftoppm >/dev/null; then
  rm -f "$dir/$base"-page-*.png
  pdftoppm -png -r 80 "$dir/$base.pdf" "$dir/$base-page"
  ls "$dir/$base"-page-*.png
fi

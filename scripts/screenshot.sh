#!/usr/bin/env bash
# Renders an HTML report in headless Chromium, with every network feature
# off (the report must open without network), into a PNG.
# Usage: screenshot.sh REPORT.html OUT.png [WIDTHxHEIGHT]
set -euo pipefail
html=$(readlink -f "$1"); out=$(readlink -f "$(dirname "$2")")/$(basename "$2"); size=${3:-1400,5000}
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync \
  --disable-default-apps --user-data-dir="$profile" --hide-scrollbars \
  --window-size="$size" --screenshot="$out" "file://$html" >/dev/null 2>&1
[ -s "$out" ] || { echo "screenshot failed: $out is empty" >&2; exit 1; }
echo "$out"

#!/usr/bin/env bash
# loaded.sh: run a command with a load generator beside it, as a busy CI
# machine would have: Debian's stress-ng with one CPU worker and one disk
# worker (writes and syncs a file in a temp dir of its own). The load
# stops with the command; the load averages before and after are printed,
# and the command's exit code is the script's.
#
#   scripts/loaded.sh make test
#   scripts/loaded.sh go test -count=20 -run 'TestX' ./pkg
#
# LOAD_ARGS replaces stress-ng's workers (default "--cpu 1 --hdd 1
# --hdd-bytes 128m").
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: $0 command [args...]" >&2; exit 2; }
command -v stress-ng >/dev/null || { echo "stress-ng is not installed (make test-loaded installs it)" >&2; exit 2; }
dir=$(mktemp -d /tmp/lockbench-load.XXXXXX)
# shellcheck disable=SC2086
setsid stress-ng ${LOAD_ARGS:---cpu 1 --hdd 1 --hdd-bytes 128m} --temp-path "$dir" --quiet &
load=$!
stop() {
  kill -TERM -- -"$load" 2>/dev/null
  wait "$load" 2>/dev/null
  rm -rf "$dir"
}
trap 'stop; exit 130' INT TERM
sleep 5 # the workers up and running before the command starts
echo "load generator (pid $load): stress-ng ${LOAD_ARGS:---cpu 1 --hdd 1 --hdd-bytes 128m}; load before: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
# The 1-minute load average every 10 s while the command runs.
( while sleep 10; do cut -d' ' -f1 /proc/loadavg; done ) > "$dir/loadavg" &
sampler=$!
start=$(date +%s)
"$@"
rc=$?
kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
echo "load during: $(awk '{ s += $1; if ($1 > m) m = $1; n++ } END { if (n) printf "mean %.1f, max %.1f over %d samples", s/n, m, n; else print "no sample (under 10s)" }' "$dir/loadavg"); after: $(cut -d' ' -f1-3 /proc/loadavg); $(( $(date +%s) - start ))s; exit $rc" >&2
stop
exit $rc

#!/usr/bin/env bash
# fuzz-targets.sh: every fuzz target of the module as ./pkg:FuzzName, one a
# line, found by `go test -list` in each package whose tests declare one, so
# that make fuzz-short and make fuzz run a new target without a list to edit.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
for pkg in $(grep -rl --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | grep -v '^./examples/' | xargs -n1 dirname | sort -u); do
  for name in $("$GO" test -list '^Fuzz' "$pkg" | grep '^Fuzz'); do
    echo "$pkg:$name"
  done
done

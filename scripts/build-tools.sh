#!/usr/bin/env bash
# Builds the linters make lint runs from the Go module proxy, once, into a
# cache outside the clone that every later clone on this machine reuses:
#   ${XDG_CACHE_HOME:-~/.cache}/lockbench/tools/staticcheck-<version>/staticcheck
#   ${XDG_CACHE_HOME:-~/.cache}/lockbench/tools/goimports-<version>/goimports
# Quiet when they are already there. With -print NAME, prints the path of
# NAME's binary (and builds it first if it is missing).
set -euo pipefail

STATICCHECK_VERSION=v0.8.2 # honnef.co/go/tools
GOIMPORTS_VERSION=v0.52.0  # golang.org/x/tools
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/lockbench/tools"
GO="${GO:-go}"

# install NAME MODULE/cmd/NAME VERSION
install() {
  local dir="$CACHE/$1-$3"
  [ -x "$dir/$1" ] && return 0
  echo "building $1 $3 from the Go module proxy (once per machine)" >&2
  mkdir -p "$dir"
  GOBIN="$dir" GOFLAGS=-mod=mod "$GO" install "$2@$3" >"$dir/build.log" 2>&1 || {
    echo "error: could not build $1 $3 (is the Go module proxy reachable?)" >&2; tail -20 "$dir/build.log" >&2; return 1; }
}

staticcheck() { install staticcheck honnef.co/go/tools/cmd/staticcheck "$STATICCHECK_VERSION"; echo "$CACHE/staticcheck-$STATICCHECK_VERSION/staticcheck"; }
goimports() { install goimports golang.org/x/tools/cmd/goimports "$GOIMPORTS_VERSION"; echo "$CACHE/goimports-$GOIMPORTS_VERSION/goimports"; }

if [ "${1:-}" = -print ]; then
  case "${2:-}" in
    staticcheck) staticcheck ;;
    goimports) goimports ;;
    *) echo "usage: build-tools.sh [-print staticcheck|goimports]" >&2; exit 2 ;;
  esac
  exit 0
fi
staticcheck >/dev/null
goimports >/dev/null

#!/usr/bin/env bash
# Builds the servers that Debian does not package (or packages too old) from
# the Go module proxy, once, into a cache outside the clone that is reused by
# every later clone on this machine:
#   ${XDG_CACHE_HOME:-~/.cache}/lockbench/etcd-<version>/etcd
#   ${XDG_CACHE_HOME:-~/.cache}/lockbench/consul-<version>/consul
# Quiet when the binaries are already there. Usage: build-servers.sh [etcd] [consul]
# With STATIC=1, builds without cgo into .../lockbench/static/<name>-<version>/
# instead: binaries for FROM scratch images (make compose-images).
set -euo pipefail

ETCD_VERSION=v3.6.16
CONSUL_VERSION=v1.14.11 # the last MPL-2.0 line usable here (1.16.1+ is BSL)
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/lockbench"
if [ "${STATIC:-0}" = 1 ]; then
  CACHE="$CACHE/static"
  export CGO_ENABLED=0
fi
GO="${GO:-go}"
want=("$@")
[ ${#want[@]} -gt 0 ] || want=(etcd consul)

build_etcd() {
  local out="$CACHE/etcd-$ETCD_VERSION/etcd"
  [ -x "$out" ] && return 0
  echo "building etcd $ETCD_VERSION from the Go module proxy (about a minute, once per machine)"
  local tmp; tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  cat > "$tmp/main.go" <<'GO'
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  (cd "$tmp" && "$GO" mod init lockbench-etcd >/dev/null 2>&1 &&
    "$GO" get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >/dev/null 2>&1 &&
    "$GO" mod tidy >/dev/null 2>&1 &&
    mkdir -p "$(dirname "$out")" && "$GO" build -o "$out.tmp" . >"$tmp/build.log" 2>&1 && mv "$out.tmp" "$out") || {
    echo "error: could not build etcd $ETCD_VERSION (is the Go module proxy reachable?)" >&2; tail -20 "$tmp/build.log" >&2; return 1; }
}

build_consul() {
  local out="$CACHE/consul-$CONSUL_VERSION/consul"
  [ -x "$out" ] && return 0
  echo "building consul $CONSUL_VERSION from the Go module proxy (about 3 minutes, once per machine)"
  local dir; dir=$("$GO" mod download -json "github.com/hashicorp/consul@$CONSUL_VERSION" 2>/dev/null | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  [ -n "$dir" ] || { echo "error: could not download github.com/hashicorp/consul@$CONSUL_VERSION" >&2; return 1; }
  local tmp; tmp=$(mktemp -d)
  trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' RETURN
  cp -r "$dir/." "$tmp/" && chmod -R u+w "$tmp"
  (cd "$tmp" &&
    "$GO" mod edit -dropreplace=github.com/hashicorp/consul/api -dropreplace=github.com/hashicorp/consul/sdk -dropreplace=github.com/hashicorp/consul/proto-public &&
    mkdir -p "$(dirname "$out")" && GOFLAGS=-mod=mod "$GO" build -o "$out.tmp" . >"$tmp/build.log" 2>&1 && mv "$out.tmp" "$out") || {
    echo "error: could not build consul $CONSUL_VERSION:" >&2; tail -20 "$tmp/build.log" >&2; return 1; }
}

for s in "${want[@]}"; do
  case "$s" in
    etcd) build_etcd ;;
    consul) build_consul ;;
    *) echo "unknown server $s" >&2; exit 2 ;;
  esac
done

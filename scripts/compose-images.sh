#!/usr/bin/env bash
# Builds the images of the compose topology (compose/docker-compose.yml)
# locally: no registry is needed or used.
#
#   lockbench/bench:local       FROM scratch: a static build of this checkout's
#                               bench (worker instances, and the toxiproxy
#                               server: `bench toxiproxy`, toxiproxy v2.12.0)
#   lockbench/etcd:3.6.16       FROM scratch: etcd built from the Go module proxy
#   lockbench/consul:1.14.11    FROM scratch: Consul built from the Go module proxy
#   lockbench/debian:bookworm   a Debian 12 base made with debootstrap and
#                               docker import, with redis-server, redis-sentinel,
#                               zookeeper and postgresql from Debian (the same
#                               packages, and so versions, as the local mode)
#
# Usage: compose-images.sh [--minimal]   (--minimal: bench and etcd only)
# Quiet for an image that already exists; REBUILD=1 rebuilds.
set -euo pipefail
cd "$(dirname "$0")/.."
GO="${GO:-go}"
minimal=0
[ "${1:-}" = --minimal ] && minimal=1
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/lockbench"
command -v docker >/dev/null || { echo "error: docker is not installed" >&2; exit 1; }

have() { [ "${REBUILD:-0}" != 1 ] && docker image inspect "$1" >/dev/null 2>&1; }

# scratch_image TAG BINARY: an image holding one static binary as its entrypoint.
scratch_image() {
  local tag=$1 bin=$2 ctx
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' RETURN
  cp "$bin" "$ctx/app"
  mkdir -p "$ctx/tmp"
  cat > "$ctx/Dockerfile" <<'DOCKERFILE'
FROM scratch
LABEL lockbench=1
COPY app /usr/local/bin/app
COPY tmp /tmp
ENTRYPOINT ["/usr/local/bin/app"]
DOCKERFILE
  docker build -q -t "$tag" "$ctx" >/dev/null 2>"$ctx/err" || { cat "$ctx/err" >&2; return 1; }
  docker image prune -f --filter label=lockbench=1 >/dev/null # the previous build of the tag, now untagged
  echo "built $tag"
}

if ! have lockbench/bench:local || [ "${REBUILD_BENCH:-1}" = 1 ]; then
  # Always rebuilt: it is this checkout's code.
  mkdir -p "$CACHE/static"
  CGO_ENABLED=0 "$GO" build -o "$CACHE/static/bench" ./cmd/bench
  scratch_image lockbench/bench:local "$CACHE/static/bench"
fi
if ! have lockbench/etcd:3.6.16; then
  STATIC=1 GO="$GO" scripts/build-servers.sh etcd
  scratch_image lockbench/etcd:3.6.16 "$CACHE/static/etcd-v3.6.16/etcd"
fi
[ $minimal = 1 ] && exit 0
if ! have lockbench/consul:1.14.11; then
  STATIC=1 GO="$GO" scripts/build-servers.sh consul
  scratch_image lockbench/consul:1.14.11 "$CACHE/static/consul-v1.14.11/consul"
fi
if ! have lockbench/debian:bookworm; then
  command -v debootstrap >/dev/null || {
    [ "$(id -u)" = 0 ] || { echo "error: debootstrap is missing; run as root to install it" >&2; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  root=$(mktemp -d)
  trap 'rm -rf "$root"' EXIT
  mirror=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
  echo "debootstrap bookworm from ${mirror:-http://deb.debian.org/debian} (a few minutes, once)"
  debootstrap --variant=minbase --include=redis-server,redis-sentinel,zookeeper,postgresql,procps \
    bookworm "$root" "${mirror:-http://deb.debian.org/debian}" >/tmp/lockbench-debootstrap.log 2>&1 || {
    tail -20 /tmp/lockbench-debootstrap.log >&2; exit 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import - lockbench/debian:bookworm >/dev/null
  echo "built lockbench/debian:bookworm"
fi

# lockbench — run `make help` for the targets.
#
# Two commands do all the set-up on a fresh Debian 12 machine:
#   make bench   installs what it needs, builds, runs scenarios/quick.yaml
#   make test    installs what it needs and runs the whole test suite

SHELL      := /bin/bash
GO         ?= go
BIN        := bin/bench
SCENARIO   ?= scenarios/quick.yaml
RESULTS    ?= results
APT_PKGS   := redis-server redis-sentinel
GOFILES    := $(shell find . -name '*.go' -not -path './bin/*')

.PHONY: help setup apt-packages build bench test vet fmt-check clean

## help: list the targets
help:
	@sed -n 's/^## //p' $(MAKEFILE_LIST) | column -t -s ':'

## setup: install the servers (Debian packages, as root) and Go modules; quiet when done
setup: apt-packages
	@$(GO) mod download

apt-packages:
	@missing=""; for b in redis-server redis-sentinel; do command -v $$b >/dev/null || missing="$$missing $$b"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing:$$missing — run 'make setup' as root (apt-get install -y $(APT_PKGS))" >&2; exit 1; fi; \
	  echo "installing $(APT_PKGS) with apt-get"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $(APT_PKGS) >/dev/null; \
	fi

## build: build bin/bench
build: $(BIN)
	@true

$(BIN): $(GOFILES) go.mod go.sum
	@$(GO) build -o $(BIN) ./cmd/bench

## bench: install, build and run the default scenario (SCENARIO=...) into results/
bench: setup build
	./$(BIN) run -o $(RESULTS) $(SCENARIO)

## test: install, then gofmt, go vet and the whole test suite with the race detector
test: setup fmt-check vet
	$(GO) test -race -count=1 -timeout 30m ./...

## vet: go vet
vet:
	@$(GO) vet ./...

## fmt-check: fail if gofmt would change a file
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## clean: remove build output (results/ is kept)
clean:
	rm -rf bin

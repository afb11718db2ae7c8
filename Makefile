# lockbench — run `make help` for the targets.
#
# Two commands do all the set-up on a fresh Debian 12 machine:
#   make bench   installs what it needs, builds, runs scenarios/backends.yaml
#   make test    installs what it needs and runs the whole test suite

SHELL      := /bin/bash
GO         ?= go
BIN        := bin/bench
SCENARIO   ?= scenarios/backends.yaml
RESULTS    ?= results
GOFILES    := $(shell find . -name '*.go' -not -path './bin/*')

# What make setup installs for each server kind, and the compose profiles:
# generated from the kinds' registrations (internal/cluster's Kind.Setup and
# Kind.Compose; TestKindsMakefile holds it).
include scripts/kinds.mk
VERSION    ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)

.PHONY: help setup apt-packages servers tools lint build build-kube kube-manifests bench bench-drivers quick known envelope stability envelope-twice perf perf-profile ci-gate compose-images compose-bench screenshot test vet fmt-check clean fuzz fuzz-short sim security test-loaded bench-jobs

## help: list the targets
help:
	@sed -n 's/^## \([^:]*\): /\1\t/p' $(MAKEFILE_LIST) | awk -F'\t' '{ printf "%-15s %s\n", $$1, $$2 }'

## setup: install the servers (Debian packages as root, etcd and Consul built once), the linters and Go modules; quiet when done
setup: apt-packages servers tools
	@$(GO) mod download

# Each package is installed only if what lockbench uses from it is missing:
# the server kinds' own (scripts/kinds.mk), the machinery's and the drivers'.
# apt-packages installs what is missing; a policy-rc.d that refuses every
# start keeps a package's postinst from starting a system service (openssh-server
# would listen on every address: lockbench's sshd runs in its test namespaces only).
apt-packages:
	@missing=""; \
	$(KIND_PKGS_MISSING) \
	command -v iptables >/dev/null || missing="$$missing iptables"; \
	[ -f /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ] || missing="$$missing libfaketime"; \
	[ -x /usr/sbin/sshd ] || missing="$$missing openssh-server"; \
	$(DRIVER_PKGS_MISSING) \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" != 0 ]; then echo "missing:$$missing; run 'make setup' as root" >&2; exit 1; fi; \
	  echo "installing$$missing with apt-get"; \
	  policy=/usr/sbin/policy-rc.d; own=""; \
	  [ -e $$policy ] || { printf '#!/bin/sh\nexit 101\n' > $$policy && chmod +x $$policy && own=1; }; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	  rc=$$?; [ -z "$$own" ] || rm -f $$policy; [ $$rc = 0 ] || exit $$rc; \
	fi

# The reference drivers' libraries (docs/drivers.md), each from Debian:
# redis-py, kazoo and python-etcd3 for Debian's python3 (/usr/bin/python3);
# Curator, with a JDK to compile its driver; node-redis, and Debian's
# nodejs where no node is installed at all (a NodeSource node, if there,
# is kept: the Node driver finds Debian's modules through NODE_PATH).
DRIVER_PKGS_MISSING = \
	[ -x /usr/bin/python3 ] || missing="$$missing python3"; \
	[ -f /usr/lib/python3/dist-packages/redis/lock.py ] || missing="$$missing python3-redis"; \
	[ -f /usr/lib/python3/dist-packages/kazoo/recipe/lock.py ] || missing="$$missing python3-kazoo"; \
	[ -f /usr/lib/python3/dist-packages/etcd3/locks.py ] || missing="$$missing python3-etcd3"; \
	[ -f /usr/share/java/curator-recipes.jar ] || missing="$$missing libcurator-recipes-java"; \
	[ -f /usr/share/java/jackson-databind.jar ] || missing="$$missing libjackson2-databind-java"; \
	[ -f /usr/share/java/slf4j-simple.jar ] || missing="$$missing libslf4j-java"; \
	command -v javac >/dev/null || missing="$$missing default-jdk-headless"; \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	[ -f /usr/share/nodejs/redis/package.json ] || missing="$$missing node-redis";

## servers: build etcd and Consul from the Go module proxy into ~/.cache/lockbench (once per machine)
servers:
	@GO=$(GO) scripts/build-servers.sh $(KIND_BUILDS)

## tools: build the pinned linters (staticcheck, goimports) from the Go module proxy into ~/.cache/lockbench/tools (once per machine)
tools:
	@GO=$(GO) scripts/build-tools.sh

## lint: staticcheck (the kubernetes tag's files too) and goimports' grouping of imports
lint: tools
	@sc=$$(GO=$(GO) scripts/build-tools.sh -print staticcheck) && \
	$$sc ./... && $$sc -tags kubernetes ./internal/machinery/kube ./internal/machinery/remote ./internal/cluster ./cmd/bench
	@out=$$($$(GO=$(GO) scripts/build-tools.sh -print goimports) -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "goimports would change:"; echo "$$out"; exit 1; fi

## build: build bin/bench, and the reference drivers into ~/.cache/lockbench/drivers (the Java one compiled there)
build: $(BIN)
	@./$(BIN) driver build >/dev/null

$(BIN): $(GOFILES) go.mod go.sum
	@$(GO) build -ldflags "-X github.com/lockbench/lockbench/internal/version.Version=$(VERSION)" -o $(BIN) ./cmd/bench

## build-kube: build bin/bench-kube, with the Kubernetes control mode (client-go, Chaos Mesh's API; untested against a cluster)
build-kube:
	@$(GO) build -tags kubernetes -ldflags "-X github.com/lockbench/lockbench/internal/version.Version=$(VERSION)" -o bin/bench-kube ./cmd/bench

## kube-manifests: write kube/lockbench.yaml and kube/targets.yaml again from internal/machinery/kube
kube-manifests:
	$(GO) test -tags kubernetes -count=1 -run 'TestManifests' ./internal/machinery/kube -update

## bench: install, build and run every backend (scenarios/backends.yaml, ~5 min; SCENARIO=... for another) into results/
bench: setup build
	./$(BIN) run -o $(RESULTS) $(SCENARIO)

# RACE_TESTS run against real servers with the race detector on the
# coordinator and the workers (the rest of the integration tests run without
# it, side by side: under -race they cost five times the CPU of two cores).
# They run only there, one at a time: two of them time what they measure.
RACE_TESTS := ^(TestControlsAgainstRealRedis|TestConcurrentRunsAreIsolated|TestOpenLoopKeepsItsSchedule)$$
# ALONE_TESTS run after the others, one at a time, with nothing beside
# them (not even another package's tests): the CI gate measures throughput,
# and the SSH control plane's test is a load of its own whose remote
# commands slow down tenfold on a busy machine.
ALONE_TESTS := ^(TestCIGateScript|TestGateOwnLockClient|TestSSHControlPlane)$$
# PARALLEL integration tests share the two cores. Four at a time, five
# fresh-clone runs in a row on this machine each failed somewhere a test
# times what it sees (a Sentinel switch, a ZooKeeper re-election, an etcd
# case's throughput, a gate's harness deadlines): three leave them the CPU
# those timings assume.
PARALLEL   ?= 3

## test: install, then gofmt, go vet, staticcheck and goimports, every unit test with -race, the integration tests against real servers side by side, and a short fuzz of each parser
test: setup fmt-check vet lint
	$(GO) test -race -short -count=1 -timeout 20m ./...
	$(GO) test -count=1 -timeout 30m -parallel $(PARALLEL) -skip '$(RACE_TESTS)|$(ALONE_TESTS)' ./backends ./cmd/bench ./internal/sim
	$(GO) test -count=1 -timeout 10m -parallel 1 -run '$(ALONE_TESTS)' ./cmd/bench
	$(GO) test -race -count=1 -timeout 20m -parallel 1 -run '$(RACE_TESTS)' ./cmd/bench
	$(GO) test -tags kubernetes -count=1 ./internal/machinery/kube
	$(GO) test -tags kubernetes -count=1 -run 'Kubernetes' ./internal/cluster
	cd examples/library && $(GO) test -count=1 ./...
	$(GO) test -count=1 -run '^TestConsulPhonesNobody$$' ./internal/cluster
	@$(MAKE) --no-print-directory fuzz-short

# security: each hole of issue 41 replayed as an attack (docs/security.md),
# one package at a time; the ones that need root or FUSE skip without them.
SECURITY_TESTS := \
	./internal/machinery/remote:'TestRepairRunsNothingFromNoteNames|TestNotesDirRefusesAPlantedLink|TestSSHKeyNeverEchoed' \
	./internal/machinery/slot:'TestSlotsCannotBeHeldHostage|TestOlderBinariesSeeTheSlotTaken' \
	./internal/cluster:'TestToxiproxyRefusesForeignRequests|TestConsulUpdateCheckIsOff|TestConsulPhonesNobody|TestSIGKILLWithALayerLeavesNothingStuck|TestStaleLayerIsSweptByTheNextRun' \
	./internal/childenv:'TestOnlyWhatIsNeededIsInherited' \
	./internal/machinery/procgroup:'TestChildrenInheritNoSecrets' \
	./backends/driver:'TestDriverGetsOnlyItsEnv|TestDriverSecretsNeverLogged|TestFloodAfterHelloNeverPanics|TestSetsidChildIsEnded|TestStderrIsCapped|TestBreaks' \
	./internal/layout:'TestRunJSONHoldsNoSecret|TestRedactorTakesTheValuesOut|TestResultsAreTheUsersAlone' \
	./internal/machinery/powerfs:'TestFailedRevertIsAnError|TestDevFuseIsCloseOnExec|TestMountingsHaveTheirConnection|TestAbortConnCutsTheLayer' \
	./internal/scenario:'TestAliasBombIsRefused|TestCaseCountsAreBounded|TestParseBad' \
	./history:'TestReaderBadInput' \
	./internal/runner:'TestHistoryIsBounded' \
	./cmd/bench:'TestExitCodeTableIsTheCodes|TestSecondSignalIsNotATeardown|TestFailedTeardownIsNotExit105|TestHostileInputIsExit104|TestRunPhonesNobody|TestKilledRunWithALayerLeavesNothingStuck|TestTargetsFile' \
	./internal/links:'TestRefuseLookups'
## security: replay every attack of docs/security.md against the code (about five minutes, with -race)
security:
	@for t in $(SECURITY_TESTS); do p=$${t%%:*}; r=$${t#*:}; \
	  $(GO) test -race -count=1 -v -run "^($$r)$$" "$$p" > /tmp/lockbench-security.log 2>&1 || { cat /tmp/lockbench-security.log; exit 1; }; \
	  echo "security $$p: $$(grep -c '^--- PASS' /tmp/lockbench-security.log) passed, $$(grep -c '^--- SKIP' /tmp/lockbench-security.log) skipped"; \
	done


# test-loaded runs make test as a busy CI machine would: Debian's
# stress-ng beside it, one CPU worker and one disk worker writing and
# syncing a file of its own (LOAD_ARGS to change them), stopped with the
# suite; the load averages while it ran are printed at the end. Nothing in
# the suite may fail for the machine's speed (issue 40): a test whose
# timing premise the load defeats retries wider or says it was unmet.
## test-loaded: make test with a load generator beside it (stress-ng --cpu 1 --hdd 1, installed with apt-get if missing), and the load it ran under
test-loaded: setup
	@command -v stress-ng >/dev/null || { \
	  if [ "$$(id -u)" != 0 ]; then echo "missing: stress-ng; run 'make test-loaded' as root" >&2; exit 1; fi; \
	  echo "installing stress-ng with apt-get"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends stress-ng >/dev/null; }
	@scripts/loaded.sh $(MAKE) --no-print-directory test

SIM_SEEDS    ?= 10000
FUZZTIME ?= 10m

# fuzz-short (part of make test): every fuzz target in the tree (found by
# scripts/fuzz-targets.sh, so a new one runs without being listed) for a count
# of inputs, about 5-10 s each here; FUZZ_COUNTS gives a target its own count,
# the others get FUZZ_DEFAULT. Counts, not durations: Go 1.26's fuzz
# coordinator can report a bare "context deadline exceeded" at the end of a
# -fuzztime duration with no failing input (golang/go#75804, fixed in Go 1.27;
# seen here on FuzzSimulate); a count has no deadline to race.
FUZZ_DEFAULT := 20000x
FUZZ_COUNTS  := ./internal/scenario:FuzzParse:4000x ./internal/threshold:FuzzParse:100000x ./history:FuzzReader:50000x \
	./history:FuzzDecoders:100000x ./internal/sim:FuzzSimulate:150x ./faults:FuzzTarget:15000x
fuzz-short:
	@for t in $$(scripts/fuzz-targets.sh); do \
	  c=$(FUZZ_DEFAULT); for k in $(FUZZ_COUNTS); do [ "$${k%:*}" = "$$t" ] && c=$${k##*:}; done; \
	  p=$${t%%:*}; n=$${t#*:}; \
	  $(GO) test -run '^$$' -fuzz "^$$n$$" -fuzztime $$c "$$p" >/tmp/lockbench-fuzz.log 2>&1 || { cat /tmp/lockbench-fuzz.log; exit 1; }; \
	  echo "fuzz $$p:$$n: $$c inputs, no finding"; \
	done

ORACLE_SEEDS ?= 10000
## sim: the checker against the simulator's ground truth on SIM_SEEDS seeds (default 10000, about 5 min here), then against every world of ORACLE_SEEDS small histories (internal/worlds, default 10000)
sim:
	SIM_SEEDS=$(SIM_SEEDS) $(GO) test -count=1 -timeout 120m -run '^Test(Jobs)?AgainstChecker$$' ./internal/sim
	set -o pipefail; ORACLE_SEEDS=$(ORACLE_SEEDS) $(GO) test -count=1 -timeout 30m -v -run '^TestEveryWorld$$' ./internal/worlds | grep -v '^=== '

## fuzz: the simulator's SIM_SEEDS seeds, then fuzz the parsers, the decoders and the simulator's seed (FUZZTIME each, default 10m)
fuzz: sim
	@for t in $$(scripts/fuzz-targets.sh); do \
	  echo "== fuzz $$t for $(FUZZTIME)"; \
	  $(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) "$${t%%:*}" || exit 1; \
	done

## vet: go vet, also of what the kubernetes build tag adds
vet:
	@$(GO) vet ./...
	@$(GO) vet -tags kubernetes ./internal/machinery/kube ./internal/machinery/remote ./internal/cluster ./cmd/bench

## fmt-check: fail if gofmt would change a file
fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

## clean: remove build output (results/ is kept)
clean:
	rm -rf bin

## quick: the fast scenario (scenarios/quick.yaml, ~1 min: single Redis and the unsafe controls)
quick: setup build
	./$(BIN) run -o $(RESULTS) scenarios/quick.yaml

KNOWN_JOBS ?= 2
# The files that take longest start first, so the others fill in beside them.
KNOWN_FIRST := $(addprefix scenarios/known/,X1-curator-session-expiry.yaml P6-postgres-clock-back.yaml Z5-zookeeper-member-cut.yaml \
	Z2-zookeeper-member-kill.yaml X2-kazoo-session-loss.yaml E6-etcd-power-loss.yaml C1-consul-pause.yaml Z3-zookeeper-lost-on.yaml \
	C4-consul-leader-kill.yaml)
## known: the known-answer suite (scenarios/known/, KNOWN_JOBS files at a time, ~10 min) and its table; fails if a row is not reproduced
known: setup build
	@d=$(RESULTS)/known-$$(date -u +%Y%m%d-%H%M%S); mkdir -p $$d; \
	{ ls $(KNOWN_FIRST); ls scenarios/known/*.yaml | grep -vxF "$$(ls $(KNOWN_FIRST))"; } | xargs -P $(KNOWN_JOBS) -I{} sh -c \
	  'n=$$(basename {} .yaml); s=$$(date +%s); ./$(BIN) run -q -dir '$$d'/$$n {} > '$$d'/$$n.log 2>&1; echo "== {}: exit $$? in $$(( $$(date +%s) - s ))s"'; \
	./$(BIN) table $$d/*/

## bench-drivers: the reference drivers beside the Go clients of the same servers, under the same faults (scenarios/drivers.yaml)
bench-drivers: setup build
	./$(BIN) run -o $(RESULTS) scenarios/drivers.yaml

## bench-jobs: jobs, not only the lock: every job strategy (locks, idempotency key, SKIP LOCKED queues, NATS JetStream, Redis Streams, the controls) without faults and with the executor paused and killed at each phase of a job, 12-24 exposures per fault cell (scenarios/jobs.yaml, ~4 min); bench table -view jobs
bench-jobs: setup build
	./$(BIN) run -o $(RESULTS) scenarios/jobs.yaml

## envelope: the safety envelope (scenarios/envelope.yaml: every lease-based backend's holder paused 0.5-4 times its lease, 10 side-by-side trials a point)
envelope: setup build
	./$(BIN) run -o $(RESULTS) scenarios/envelope.yaml

REPEATS   ?= 3
STABILITY ?= stability
## stability: make bench's profile (SCENARIO) REPEATS times (results/stability-<time>/1..), then bench agree: fails on a run that failed, a row whose verdict flipped, a rate whose 95% intervals do not overlap
stability: setup build
	@d=$(RESULTS)/$(STABILITY)-$$(date -u +%Y%m%d-%H%M%S); mkdir -p $$d; rc=0; \
	for i in $$(seq $(REPEATS)); do s=$$(date +%s); r=0; ./$(BIN) run -q -dir $$d/$$i $(SCENARIO) > $$d/$$i.log 2>&1 || r=$$?; \
	  echo "== run $$i of $(SCENARIO): exit $$r in $$(( $$(date +%s) - s ))s"; [ $$r -eq 0 ] || rc=$$r; done; \
	./$(BIN) agree $$d || rc=$$?; exit $$rc

## envelope-twice: the safety envelope twice (results/envelope-twice-<time>/1, 2), then bench agree: every point whose 95% intervals do not overlap
envelope-twice: setup build
	@$(MAKE) --no-print-directory stability SCENARIO=scenarios/envelope.yaml REPEATS=2 STABILITY=envelope-twice

## perf: bench check's analysis of a 3M-event, 20k-key history (events/s, memory); the harness against a bare lock loop, side by side, for redis and etcd; then each reference driver against its library's own loop, and the protocol's round trip; prints the ratios
perf: setup build
	$(GO) test -run '^$$' -bench '^BenchmarkCheck3M20k$$' -benchtime 3x ./verdict
	./$(BIN) perf -backends redis,etcd -clients 64 -duration 5s -rounds 5
	./$(BIN) driver perf -clients 8 -duration 4s -rounds 3 redis-py kazoo python-etcd3 curator node-redis

## perf-profile: what each lock costs three ways (scenarios/perf.yaml: uncontended, hand-off, open loop; ~3 min)
perf-profile: setup build
	./$(BIN) run -o $(RESULTS) scenarios/perf.yaml

RUNS     ?= 5
BASELINE ?= $(RESULTS)/baseline
GATE     ?= scenarios/quick.yaml
## ci-gate: RUNS runs of GATE (default scenarios/quick.yaml) against BASELINE (created on first use), gated by bench compare (scripts/ci-gate.sh)
ci-gate: setup build
	scripts/ci-gate.sh -n $(RUNS) -b $(BASELINE) -o $(RESULTS)/ci $(GATE)

## compose-images: build the compose topology's images here, no registry (debootstrap + docker import; scratch images of static builds)
compose-images:
	@GO=$(GO) scripts/compose-images.sh

COMPOSE := docker-compose -f compose/docker-compose.yml -p lockbench $(COMPOSE_PROFILES)
## compose-bench: bring the compose topology up, run compose/scenario.yaml against it (servers and workers as containers), bring it down
compose-bench: setup build compose-images
	@$(COMPOSE) up -d --remove-orphans
	@rc=0; ./$(BIN) run -o $(RESULTS) -targets compose/targets.yaml -compose compose/docker-compose.yml compose/scenario.yaml || rc=$$?; \
	$(COMPOSE) down -v --remove-orphans >/dev/null 2>&1; exit $$rc

## screenshot: render the whole RUN=<results folder>/report.html in headless Chromium (installed if missing): report.pdf, a PNG per page, report.png
screenshot:
	@[ -n "$(RUN)" ] || { echo "usage: make screenshot RUN=results/<folder>" >&2; exit 2; }
	@command -v chromium >/dev/null && command -v pdftoppm >/dev/null || { echo "installing chromium and poppler-utils with apt-get"; \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium poppler-utils >/dev/null; }
	@scripts/screenshot.sh "$(RUN)/report.html" "$(RUN)/report.png"

# fenec-entry: the two commands a fresh machine needs are `make demo` and `make test`.
GO      ?= go
BIN     := bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT  ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)

.PHONY: build demo test fuzz bench bench-proxies bench-protocols bench-storm vet fmt clean cross

build:
	@mkdir -p $(BIN)
	@echo "building $(BIN)/fenec-entry and $(BIN)/fenec-standin (the first build downloads and compiles every dependency: about a minute on 2 cores)"
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/fenec-entry ./cmd/fenec-entry
	$(GO) build -trimpath -o $(BIN)/fenec-standin ./cmd/fenec-standin

# Stand-in routers for eu, us and ap and three entries in one encrypted gossip
# cluster on loopback; prints URLs and curl lines. Ctrl-C stops everything.
demo: build
	@$(BIN)/fenec-entry demo

# The whole test suite, with the race detector. CI runs exactly this.
test:
	$(GO) vet ./...
	$(GO) test -race -pgo=off -count=1 -timeout 20m ./...
	bash deploy/check.sh

# Short fuzzing runs of every fuzz target (seed corpora run in `make test`); FUZZTIME each.
FUZZTIME ?= 30s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzTenantOf$$' -fuzztime $(FUZZTIME) ./proxy
	$(GO) test -run '^$$' -fuzz '^FuzzHeaderRewrite$$' -fuzztime $(FUZZTIME) ./proxy
	$(GO) test -run '^$$' -fuzz '^FuzzAnswerDifferential$$' -fuzztime $(FUZZTIME) ./proxy
	$(GO) test -run '^$$' -fuzz '^FuzzDifferential$$' -fuzztime $(FUZZTIME) ./h1
	$(GO) test -run '^$$' -fuzz '^FuzzPlainRequest$$' -fuzztime $(FUZZTIME) ./h1
	$(GO) test -run '^$$' -fuzz '^FuzzPlainName$$' -fuzztime $(FUZZTIME) ./internal/httpsyntax
	$(GO) test -run '^$$' -fuzz '^FuzzHTTPGuts$$' -fuzztime $(FUZZTIME) ./internal/httpsyntax
	$(GO) test -run '^$$' -fuzz '^FuzzDoor$$' -fuzztime $(FUZZTIME) ./door
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./gossip/internal/wire
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeAck$$' -fuzztime $(FUZZTIME) ./gossip/internal/wire
	$(GO) test -run '^$$' -fuzz '^FuzzReader$$' -fuzztime $(FUZZTIME) ./homes/record
	$(GO) test -run '^$$' -fuzz '^FuzzDecode$$' -fuzztime $(FUZZTIME) ./state
	$(GO) test -run '^$$' -fuzz '^FuzzEnvFile$$' -fuzztime $(FUZZTIME) ./cmd/fenec-entry

# Hot-path micro-benchmarks.
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./proxy ./homes ./h1

# fenec-entry against direct and nginx (installs them; see bench/README.md).
bench-proxies:
	$(GO) run ./bench proxies $(BENCH_FLAGS)

# fenec-entry against nginx over every protocol a client speaks, and memory (bench/README.md).
bench-protocols:
	$(GO) run ./bench proxies -mode protocols $(BENCH_FLAGS)

# fenec-entry and nginx in a storm: every request answered or LOST, by kind, in seven rows
# (new connections, keep-alive, pipelining, slow clients, the open-file limit, SIGTERM and an
# upgrade in place under load); about 12 minutes (bench/README.md, "Storm"). STORM_FLAGS=-quick
# for a 2-minute smoke run.
bench-storm:
	$(GO) run ./bench storm $(STORM_FLAGS)

vet:
	$(GO) vet ./...

# The module builds and vets off Linux too (h1 and a few system calls are Linux's: they sit
# behind build tags, with net/http and portable calls elsewhere). CI runs this.
CROSS ?= linux/arm64 darwin/amd64 darwin/arm64 freebsd/amd64 freebsd/arm64 windows/amd64
cross:
	@set -e; for t in $(CROSS); do \
		echo "cross: $$t"; \
		GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) build ./... ; \
		GOOS=$${t%/*} GOARCH=$${t#*/} $(GO) vet ./... ; \
	done

fmt:
	gofmt -l -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN)

# docs/status.png: the /status page in headless Chromium (apt-get install -y chromium).
.PHONY: screenshot
screenshot:
	GO=$(GO) bash scripts/screenshot.sh docs/status.png

# The chaos suite (chaos/, docs/CHAOS.md): real entries and stand-in routers on loopback,
# killed, stopped, partitioned (nftables, as root), faulted and rotated to a new gossip key
# under load, upgraded from the previous release and back, with the ledger invariants checked
# after every scenario. CI-sized (scenarios 1-4, 6 and 7; 7 needs the previous release's commit,
# so a full clone): about 3.5 minutes on 2 cores, at most about 6 when a partition heal is slow
# to converge (docs/CHAOS.md, Findings).
.PHONY: chaos chaos-long
chaos:
	$(GO) test -tags chaos -count=1 -v -timeout 10m -run 'TestChaos[1-467]' ./chaos

# Everything at once, longer (about 5 minutes of chaos); not in CI.
chaos-long:
	CHAOS_LONG=1 $(GO) test -tags chaos -count=1 -v -timeout 20m -run 'TestChaos5Long' ./chaos

# The lab's WAN emulator (lab/README.md): network namespaces linked with the round trips of real
# cloud regions, its tests, and the full fleet run (entries and stand-in routers across it,
# one table of measurements). Needs root and Linux; about 3 minutes. `make test` runs the
# short fleet run (under a minute).
.PHONY: lab
lab:
	FENEC_LAB=full $(GO) test -race -count=1 -v -timeout 15m ./lab/...

# Logbook. Needs only Go; tools the targets use are installed into .tools/.
GO        ?= go
BIN       := $(CURDIR)/bin
TOOLS     := $(CURDIR)/.tools
STATICCHECK_VERSION := v0.8.2
NATSCLI_VERSION     := v0.5.0

.PHONY: all build run test test-race test-full lint fmt-check natscli bench crash crash-mirror crash-enumerate failover faultfs fuzz clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# The most complete story the project can tell today (see README).
run: build
	@./scripts/run.sh

# vet; the whole suite under the race detector (-short: the property test at
# 1,000 logs, no cluster, SIGKILL or crash runs); then the whole suite again
# without it and without -short: the 10,000-log property test, the 1M-record
# flatness check, the 3-node cluster (a leader failover under an import and a
# lost quorum among them), the SIGKILLed coordinator and a short crash
# campaign. About 4 minutes on 2 cores.
test: test-race test-full

test-race:
	$(GO) vet ./...
	$(GO) test -race -short -count=1 -timeout 20m ./...

# e2e/protocol_cli_test.go runs docs/PROTOCOL.md's worked example with the nats CLI.
test-full: $(TOOLS)/nats
	$(GO) test -count=1 -timeout 30m ./...

lint: $(TOOLS)/staticcheck fmt-check
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# The nats CLI (natscli), for docs/PROTOCOL.md's worked example and its test.
natscli: $(TOOLS)/nats

$(TOOLS)/nats:
	GOBIN=$(TOOLS) $(GO) install github.com/nats-io/natscli/nats@$(NATSCLI_VERSION)

# Benchmarks measure and report; they assert nothing. Each writes its output
# to bench-<part>.txt; docs/BENCHMARKS.md holds the figures, the machine and
# how to read them. BENCH picks the parts (default all; the restart benchmark
# builds 10k threads / 1M records and takes minutes; agents runs HANDOFFS
# worker deaths and a tree of AGENTS simulated agents on WORKERS workers;
# scale imports generated trees of 1,111 and 11,111 threads into a serving
# coordinator and asks tree and unconfirmed of the index and of the full scan,
# LOGBOOK_SCALE_DEPTHS="3 4 5" adds 111,111 threads).
BENCH ?= replay bus index mirror resume restart agents scale
bench:
	@for part in $(BENCH); do case $$part in \
	replay)  $(GO) test -run '^$$' -bench . -benchtime 3x -timeout 60m ./internal/replay/ ;; \
	bus)     $(GO) test -run '^$$' -bench 'Throughput|FlushLatency' -benchtime 20000x ./internal/stream/ && \
	         $(GO) test -run '^$$' -bench PackVsBatch ./internal/stream/ ;; \
	index)   $(GO) test -run '^$$' -bench . -benchtime 3x -timeout 60m ./internal/index/ ;; \
	mirror)  $(GO) test -run '^$$' -bench 'MirrorLag|MirrorCatchUp' -benchtime 1x ./internal/stream/mirror/ ;; \
	resume)  $(GO) test -run '^$$' -bench Resume -benchtime 10x -timeout 30m ./internal/reconcile/ ;; \
	restart) $(GO) test -run '^$$' -bench Restart -benchtime 1x -timeout 60m ./e2e/ ;; \
	scale)   $(GO) test -run '^$$' -bench Scale -benchtime 1x -timeout 180m ./e2e/ ;; \
	agents)  $(GO) test -run '^$$' -bench Handoff -benchtime 1x -timeout 30m ./agent/ && \
	         $(GO) test -run '^$$' -bench AgentTree -benchtime 1x -timeout 90m ./e2e/ ;; \
	*) echo "unknown bench part $$part"; exit 2 ;; \
	esac 2>&1 | tee $(CURDIR)/bench-$$part.txt; done

# The crash campaign (docs/RELIABILITY.md): agent-sim crash starts a
# coordinator, the world and three workers as processes and runs
# CRASH_ROUNDS rounds, each a seeded agent tree with one fault injected
# (SIGKILL of a worker or the coordinator at a random moment or at a named
# crash point, SIGSTOP of a worker past its lease), then checks every
# invariant against ground truth. CRASH_SEED=n replays a campaign (0: a seed
# from the clock, printed); CRASH_POINTS narrows the faults (default all).
# make test runs a short one (e2e TestCrashCampaignShort).
CRASH_ROUNDS ?= 300
CRASH_SEED   ?= 0
CRASH_POINTS ?= all
crash: build
	$(BIN)/agent-sim crash --rounds $(CRASH_ROUNDS) --points '$(CRASH_POINTS)' $(if $(filter-out 0,$(CRASH_SEED)),--seed $(CRASH_SEED))

# The mirror's crash campaign: `coordinator serve` SIGKILLed CRASH_NAMED times at
# each named crash point and at CRASH_MIRROR_ROUNDS random moments while writers
# stream records; invariants checked after every kill and at the end. Seeded:
# the seed is printed; CRASH_SEED=n replays a run. (go test ./... runs a short one.)
CRASH_MIRROR_ROUNDS ?= 40
CRASH_NAMED         ?= 3
crash-mirror:
	$(GO) test -count=1 -timeout 60m -v -run '^TestMirrorCrash$$' ./e2e/ -crash.rounds $(CRASH_MIRROR_ROUNDS) -crash.named $(CRASH_NAMED) -crash.seed $(CRASH_SEED)

# The exhaustive crash mode (agent-sim crash --enumerate, docs/RELIABILITY.md): every
# named crash point at every position in the scripted trees, for ENUM_SEEDS
# seeds (the mirror's points for the first ENUM_MIRROR_SEEDS), in one
# process; exits non-zero naming the first scenario that broke an invariant.
# ENUM_FLAGS adds flags (--trees, --points, --json, --scenario ID ...).
# make test runs one seed of it (cmd/agent-sim's TestEnumerateOneSeed).
ENUM_SEEDS        ?= 55
ENUM_MIRROR_SEEDS ?= 3
ENUM_FLAGS        ?=
crash-enumerate: build
	$(BIN)/agent-sim crash --enumerate --seeds $(ENUM_SEEDS) --mirror-seeds $(ENUM_MIRROR_SEEDS) $(ENUM_FLAGS)

# The ROLLOUTS leader of a three-node cluster shut down under an import, and
# two of its three nodes shut down under another (quorum lost: the import
# must fail within seconds), FAILOVER_COUNT times each (make test runs them
# once; a soak shows a rare stall).
FAILOVER_COUNT ?= 10
failover:
	$(GO) test -count=$(FAILOVER_COUNT) -failfast -timeout 60m -v -run '^(TestImportRidesLeaderFailover|TestImportFailsWhenQuorumLost)$$' ./e2e/

# A soak of the mirror's fault-FS tests (injected EIO/ENOSPC on write, fsync
# and rename), FAULTFS_COUNT times each. make test runs them once; how the
# faults fall across batches depends on timing, so many runs see more cases.
FAULTFS_COUNT ?= 50
faultfs:
	$(GO) test -count=$(FAULTFS_COUNT) -run '^(TestFailedFsyncNeverAdvancesWatermark|TestFailedBatchForgetsItsEpochs|TestFullDiskIsReported|TestFailedTornRepairLeavesNothing)$$' ./internal/stream/mirror/

# Fuzz each target for FUZZTIME (CI runs only their seed corpora, in make test).
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeLine$$' -fuzztime $(FUZZTIME) ./internal/rollout/
	$(GO) test -run '^$$' -fuzz '^FuzzCursors$$' -fuzztime $(FUZZTIME) ./internal/rollout/
	$(GO) test -run '^$$' -fuzz '^FuzzReplay$$' -fuzztime $(FUZZTIME) ./internal/replay/

clean:
	rm -rf $(BIN) bench-*.txt

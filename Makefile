# Logbook. Needs only Go; tools the targets use are installed into .tools/.
GO        ?= go
BIN       := $(CURDIR)/bin
TOOLS     := $(CURDIR)/.tools
STATICCHECK_VERSION := v0.8.2

.PHONY: all build run test test-race test-property lint fmt-check bench crash fuzz clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

# The most complete story the project can tell today (see README).
run: build
	@./scripts/run.sh

# vet, the whole suite under the race detector (property test at 1,000 logs),
# then the full 10,000-log property test and the 1M-record flatness check
# without it (the race detector makes them ~8x slower).
test: test-race test-property

test-race:
	$(GO) vet ./...
	$(GO) test -race -short -count=1 -timeout 20m ./...

test-property:
	$(GO) test -count=1 -timeout 10m -run 'TestFastEqualsNaive|TestPropertyCatchesMutant|TestFastPathIsFlat' ./internal/replay/

lint: $(TOOLS)/staticcheck fmt-check
	$(GO) vet ./...
	$(TOOLS)/staticcheck ./...

fmt-check:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "not gofmt-formatted:"; echo "$$out"; exit 1; fi

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Benchmarks measure and report; they assert nothing. Figures go to docs/BENCHMARKS.md.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 60m ./internal/replay/ | tee $(CURDIR)/bench-replay.txt

# Fuzz each target for FUZZTIME (CI runs only their seed corpora, in make test).
FUZZTIME ?= 60s
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeLine$$' -fuzztime $(FUZZTIME) ./internal/rollout/
	$(GO) test -run '^$$' -fuzz '^FuzzCursors$$' -fuzztime $(FUZZTIME) ./internal/rollout/
	$(GO) test -run '^$$' -fuzz '^FuzzReplay$$' -fuzztime $(FUZZTIME) ./internal/replay/

clean:
	rm -rf $(BIN) bench-*.txt

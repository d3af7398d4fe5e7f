# Weir — the two commands a newcomer needs are `make demo` and `make test`.

GO       ?= go
BIN      ?= bin
BUF      := $(GO) tool -modfile=tools/go.mod buf
BINARIES := jobmanager taskmanager weir

.PHONY: all build test test-short vet proto check-proto demo image chaos clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ $(addprefix ./cmd/,$(BINARIES))

# The whole suite, race detector on, end-to-end tests included.
test: vet
	$(GO) test -race -count=1 -timeout 20m ./...

test-short:
	$(GO) test -race -short ./...

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# Kill TaskManagers under a running job, many times, and check exactly-once
# output (plus the at-least-once counter-proof). About 10 minutes by
# default; CHAOS_ROUNDS and CHAOS_SEED (0 = from the clock) configure it.
CHAOS_ROUNDS ?= 100
CHAOS_SEED   ?= 0
chaos:
	$(GO) test -count=1 -v -timeout 60m -run 'TestChaos' ./e2e -args -chaos.rounds=$(CHAOS_ROUNDS) -chaos.seed=$(CHAOS_SEED)

# Regenerate the protobuf code from proto/ with pinned plugin versions.
proto:
	rm -f proto/weir/v1/*.pb.go
	$(BUF) lint
	$(BUF) generate

# Fail if the committed generated code differs from what `make proto` makes.
check-proto: proto
	git diff --exit-code -- proto/ || { echo "generated protobuf code is stale: run make proto and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- proto/)" || { git status --porcelain -- proto/; echo "untracked generated files: run make proto and commit"; exit 1; }

# A local cluster (1 JobManager, 2 TaskManagers) running the example job.
demo: build
	./scripts/demo.sh

# The container image deploy/docker-compose.yml runs, built from scratch.
image: build
	rm -rf $(BIN)/image && mkdir -p $(BIN)/image/tmp
	cp $(addprefix $(BIN)/,$(BINARIES)) $(BIN)/image/
	docker build -q -t weir:dev -f deploy/Dockerfile $(BIN)/image

clean:
	rm -rf $(BIN)

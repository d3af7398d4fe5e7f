# Weir — the two commands a newcomer needs are `make demo` and `make test`.

GO       ?= go
BIN      ?= bin
BUF      := $(GO) tool -modfile=tools/go.mod buf
BINARIES := jobmanager taskmanager weir weir-operator
DAEMONS  := jobmanager taskmanager weir-operator

.PHONY: all build test test-short fuzz versitygw vet proto check-proto proto-baseline demo image chaos bench clean autoscaler-step \
	etcd-image kafka-image s3-image prometheus-image images up down compose-test pki faults soak \
	kafka-nemesis sim sim-operator docs soak-sql-ttl soak-state-ttl kube-apiserver kube-gen helm kube-manifests

all: build

# The daemons are pure Go, static (CGO_ENABLED=0) for the FROM scratch
# image. weir links PostgreSQL's parser (libpg_query, C, through cgo) for
# `weir sql`: it is built with cgo and linked statically, so it runs in
# the same image; the netgo and osusergo tags use Go's resolver and user
# lookup instead of glibc's, which would load shared libraries at run
# time. Compiling libpg_query takes minutes once; the build cache keeps it.
WEIR_BUILD := CGO_ENABLED=1 $(GO) build -trimpath -tags netgo,osusergo -ldflags '-extldflags "-static"'
build:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ $(addprefix ./cmd/,$(DAEMONS))
	$(WEIR_BUILD) -o $(BIN)/ ./cmd/weir

# The whole suite, race detector on, end-to-end tests included. Tests build
# with the fault points compiled in (internal/fault); the binaries `make
# build` ships do not have them.
# The output is kept in $(BIN)/test.log; when the run fails, its race
# reports and failures are printed again at the end, where a CI log's tail
# shows them.
TEST_TAGS ?= failpoints
test: vet versitygw kube-apiserver helm
	@bash -o pipefail -c 'WEIR_VERSITYGW=$(abspath $(BIN))/versitygw WEIR_KUBE_APISERVER=$(abspath $(BIN))/kube-apiserver WEIR_HELM=$(abspath $(BIN))/helm $(GO) test -race -tags $(TEST_TAGS) -count=1 -timeout 45m ./... 2>&1 | tee $(BIN)/test.log' || { \
		echo "== make test failed; its race reports and failures again:"; \
		grep -a -A50 -e '^WARNING: DATA RACE' $(BIN)/test.log | head -300; \
		grep -a -e '^--- FAIL' -e '^FAIL' -e '^panic:' $(BIN)/test.log | head -50; \
		exit 1; }

test-short: versitygw kube-apiserver helm
	WEIR_VERSITYGW=$(abspath $(BIN))/versitygw WEIR_KUBE_APISERVER=$(abspath $(BIN))/kube-apiserver WEIR_HELM=$(abspath $(BIN))/helm $(GO) test -race -tags $(TEST_TAGS) -short ./...

# Every fuzz target (func FuzzXxx in this module's tests) in turn, for
# FUZZTIME each: about 7 minutes with the default, `make fuzz FUZZTIME=10m`
# for a longer search. The targets' seed corpora (f.Add and testdata/fuzz)
# also run as ordinary tests in `make test`; an input that fails is written
# to the package's testdata/fuzz, where it stays as a regression test once
# committed. FUZZFLAGS adds go test flags, e.g. FUZZFLAGS=-parallel=1.
FUZZTIME  ?= 1m
FUZZFLAGS ?=
fuzz:
	@set -e; for f in $$(git ls-files -co --exclude-standard -- '*_test.go' ':!:deploy/' ':!:tools/'); do \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== ./$$(dirname $$f) $$name for $(FUZZTIME)"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $(FUZZFLAGS) ./$$(dirname $$f); \
		done; \
	done

# The S3 server the storage tests run against: versitygw from the Go
# module proxy (the tools-only module deploy/s3 pins it), built once here
# rather than by each test package that needs it.
versitygw:
	cd deploy/s3 && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $(BIN))/versitygw github.com/versity/versitygw/cmd/versitygw

# A real Kubernetes API server for the tests of --ha kubernetes, the
# operator and the Helm chart (internal/kubetest runs it over an embedded
# etcd). The tools-only module deploy/kubernetes/apiserver pins
# k8s.io/kubernetes with its staging modules replaced by their published
# versions. The first build takes 10-20 minutes on 2 cores; the build
# cache keeps it, and an existing binary of the pinned version is kept.
KUBE_APISERVER_VERSION := v1.37.2
kube-apiserver:
	@if [ -x $(BIN)/kube-apiserver ] && [ "$$(cat $(BIN)/kube-apiserver.version 2>/dev/null)" = "$(KUBE_APISERVER_VERSION)" ]; then exit 0; fi; \
	echo "== building kube-apiserver $(KUBE_APISERVER_VERSION) (once; 10-20 minutes)"; \
	cd deploy/kubernetes/apiserver && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(abspath $(BIN))/kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver && \
	echo $(KUBE_APISERVER_VERSION) > $(abspath $(BIN))/kube-apiserver.version

# Helm, to lint and render the charts in deploy/helm (pinned by the
# tools-only module deploy/kubernetes/helmtool).
HELM_VERSION := v4.3.2
helm:
	@if [ -x $(BIN)/helm ] && [ "$$(cat $(BIN)/helm.version 2>/dev/null)" = "$(HELM_VERSION)" ]; then exit 0; fi; \
	cd deploy/kubernetes/helmtool && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $(abspath $(BIN))/helm helm.sh/helm/v4/cmd/helm && \
	echo $(HELM_VERSION) > $(abspath $(BIN))/helm.version

# The plain manifests, for those who do not use Helm: the charts rendered
# with release name weir in namespace weir (a test checks they are
# current).
kube-manifests: helm
	$(BIN)/helm template weir deploy/helm/weir-operator --namespace weir --include-crds > deploy/kubernetes/manifests/weir-operator.yaml
	$(BIN)/helm template weir deploy/helm/weir-cluster --namespace weir --set tls.createSecret=false > deploy/kubernetes/manifests/weir-cluster.yaml

vet:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags $(TEST_TAGS) ./...

# Chaos on real processes, checked exactly once: TaskManagers killed at
# random moments (CHAOS_ROUNDS kills, plus the at-least-once run), then
# fault points armed at chosen steps of a checkpoint's life on an HA
# cluster (CHAOS_FAULT_ROUNDS rounds, every point in turn; crashes and
# injected errors). About 25 minutes by default; CHAOS_SEED (0 = from the
# clock) fixes the random choices; CHAINING=false runs the jobs unchained.
CHAOS_ROUNDS       ?= 100
CHAOS_FAULT_ROUNDS ?= 105
CHAOS_SEED         ?= 0
CHAINING           ?= true
chaos:
	$(GO) test -tags $(TEST_TAGS) -count=1 -v -timeout 90m -run 'TestChaos' ./e2e -args -chaos.rounds=$(CHAOS_ROUNDS) -chaos.faults=$(CHAOS_FAULT_ROUNDS) -chaos.seed=$(CHAOS_SEED) -chaining=$(CHAINING)

# The Kafka nemesis (internal/kafka/nemesis_test.go): random sequences of
# checkpoints, failures, restores, rescales and broker faults against the
# Kafka source and exactly-once sink on an in-process broker, each judged
# exactly once by a read_committed consumer. make test runs 50 sequences
# per protocol; this runs NEMESIS_SEQUENCES per protocol (Kafka 4 and
# 3.9) from NEMESIS_SEED, then shows that it finds each bug the sink's
# transaction machine once had. A failing seed is printed with the
# command that replays it.
NEMESIS_SEQUENCES ?= 1000
NEMESIS_SEED      ?= 0
NEMESIS_STEPS     ?= 40
kafka-nemesis:
	$(GO) test -tags $(TEST_TAGS) -count=1 -timeout 3h -run 'TestKafkaNemesis' ./internal/kafka -args \
		-nemesis.sequences=$(NEMESIS_SEQUENCES) -nemesis.seed=$(NEMESIS_SEED) -nemesis.steps=$(NEMESIS_STEPS) -test.v

# The control-plane simulation (internal/sim): a JobManager and three
# TaskManagers in one goroutine on a simulated clock, messages dropped,
# delayed, duplicated, hosts crashed and partitioned, checked after every
# step and for liveness once the faults stop. make test runs 1,000 seeds;
# this runs SIM_SEEDS from SIM_SEED (about 24,000 a minute per core
# without the race detector), then shows that it finds each control-plane
# bug put back. A failing seed is printed with the command that replays it.
SIM_SEEDS ?= 100000
SIM_SEED  ?= 0
sim:
	$(GO) test -tags $(TEST_TAGS) -count=1 -timeout 3h -run 'TestSimulation' ./internal/sim -args \
		-sim.seeds=$(SIM_SEEDS) -sim.seed=$(SIM_SEED) -test.v

# The operator's lifecycle through many more seeded interleavings of
# spec changes, suspensions and faults than make test runs (3000).
LIFECYCLE_SEEDS ?= 200000
sim-operator:
	$(GO) test -count=1 -timeout 1h -run 'TestLifecycleExplored' ./internal/operator/lifecycle -args -lifecycle.seeds=$(LIFECYCLE_SEEDS)

# The benchmark suite (bench/README.md): floors of this machine,
# then every benchmark on real daemons; prints one table and writes it as
# JSON. About 8 minutes. BENCH=B2 (an ID or name, comma-separated) runs
# only those after the floors and writes bench/results/$(BENCH).json;
# BENCH_FLAGS=-quick is a smoke run, -profile also saves CPU profiles.
# The daemons and programs it runs are built as `make build` builds them
# (no cgo); weir-bench itself links the SQL compiler (N2:
# internal/sql/compile, libpg_query through cgo), so it is built with cgo.
# It needs no bin/weir.
BENCH       ?=
BENCH_FLAGS ?=
comma       := ,
bench:
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/ ./cmd/jobmanager ./cmd/taskmanager ./bench/cmd/bench-taskmanager ./bench/cmd/bench-jobmanager ./bench/cmd/bench-goapi ./cmd/kafka-dev ./examples/nexmark
	CGO_ENABLED=1 $(GO) build -trimpath -o $(BIN)/ ./bench/cmd/weir-bench
	$(if $(filter S3 s3 s3-checkpoints,$(subst $(comma), ,$(BENCH))),cd deploy/s3 && CGO_ENABLED=0 $(GO) build -trimpath -o $(abspath $(BIN))/versitygw github.com/versity/versitygw/cmd/versitygw)
	$(BIN)/weir-bench -bin $(BIN) -out bench/results/$(if $(BENCH),$(subst $(comma),-,$(BENCH)),latest).json $(if $(BENCH),-only $(BENCH)) $(BENCH_FLAGS)

# Regenerate the protobuf code from proto/ with pinned plugin versions.
proto:
	rm -f proto/weir/v1/*.pb.go proto/weir/v1/weirv1grpc/*.pb.go
	$(BUF) lint
	$(BUF) generate

# docs/connectors-reference.md from the registry of operators and
# connectors (internal/connector); a test fails when it is stale.
docs:
	$(GO) test ./internal/connector/builtin -run TestReference -count=1 -args -update

# Fail if the committed generated code differs from what `make proto` makes,
# or if the protos break the wire contract of proto/baseline.binpb (buf's
# FILE rules: no field, message, enum value or RPC removed, renumbered or
# retyped). The baseline is the protos as released; until the first release
# it is the contract as first pinned. `make proto-baseline` renews it, at a
# release and only then.
# The operator's generated code: deepcopy functions of its resources and
# their CustomResourceDefinitions (controller-gen, pinned in tools/).
CONTROLLER_GEN := $(GO) tool -modfile=tools/go.mod controller-gen
kube-gen:
	$(CONTROLLER_GEN) object paths=./operator/api/...
	$(CONTROLLER_GEN) crd paths=./operator/api/... output:crd:dir=deploy/kubernetes/crds
	rm -rf deploy/helm/weir-operator/crds && cp -r deploy/kubernetes/crds deploy/helm/weir-operator/crds

check-proto: proto kube-gen
	$(BUF) breaking --against proto/baseline.binpb
	git diff --exit-code -- proto/ || { echo "generated protobuf code is stale: run make proto and commit"; exit 1; }
	git diff --exit-code -- operator/api/ deploy/kubernetes/crds/ deploy/helm/weir-operator/crds/ || { echo "the operator's generated code is stale: run make kube-gen and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- proto/)" || { git status --porcelain -- proto/; echo "untracked generated files: run make proto and commit"; exit 1; }

proto-baseline:
	$(BUF) build -o proto/baseline.binpb

# A local cluster (1 JobManager, 2 TaskManagers) running the example job.
demo: build
	./scripts/demo.sh

# The container image deploy/docker-compose.yml runs, built from scratch.
image: build
	rm -rf $(BIN)/image && mkdir -p $(BIN)/image/tmp
	cp $(addprefix $(BIN)/,$(BINARIES)) $(BIN)/image/
	docker build -q -t weir:dev -f deploy/Dockerfile $(BIN)/image

# --- The docker-compose cluster (deploy/docker-compose.yml) ---------------
# Every image is built locally FROM scratch: nothing is pulled. etcd comes
# from the Go module proxy (the tools-only module deploy/etcd pins it), the
# Kafka-protocol development broker from this module (cmd/kafka-dev), the
# S3 server (versitygw) from the module proxy (deploy/s3 pins it),
# Prometheus from Debian's package (deploy/prometheus/rootfs.sh).
COMPOSE_CMD ?= $(shell command -v docker-compose >/dev/null 2>&1 && echo docker-compose || echo docker compose)
COMPOSE     := $(COMPOSE_CMD) -p weir -f deploy/docker-compose.yml

etcd-image:
	rm -rf $(BIN)/etcd-image && mkdir -p $(BIN)/etcd-image/tmp
	cd deploy/etcd && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o ../../$(BIN)/etcd-image/etcd go.etcd.io/etcd/server/v3
	cd deploy/etcd && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o ../../$(BIN)/etcd-image/etcdctl go.etcd.io/etcd/etcdctl/v3
	docker build -q -t weir-etcd:dev -f deploy/etcd/Dockerfile $(BIN)/etcd-image

kafka-image:
	rm -rf $(BIN)/kafka-image && mkdir -p $(BIN)/kafka-image/tmp
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/kafka-image/kafka-dev ./cmd/kafka-dev
	docker build -q -t weir-kafka:dev -f deploy/kafka/Dockerfile $(BIN)/kafka-image

s3-image:
	rm -rf $(BIN)/s3-image && mkdir -p $(BIN)/s3-image/tmp $(BIN)/s3-image/data/weir
	cd deploy/s3 && CGO_ENABLED=0 $(GO) build -trimpath -ldflags='-s -w' -o ../../$(BIN)/s3-image/versitygw github.com/versity/versitygw/cmd/versitygw
	docker build -q -t weir-s3:dev -f deploy/s3/Dockerfile $(BIN)/s3-image

prometheus-image:
	deploy/prometheus/rootfs.sh $(abspath $(BIN))/prometheus-image/rootfs $(abspath $(BIN))/debs
	$(BIN)/prometheus-image/rootfs/usr/bin/promtool check config --syntax-only deploy/prometheus.yml
	docker build -q -t weir-prometheus:dev -f deploy/prometheus/Dockerfile $(BIN)/prometheus-image

images: image etcd-image kafka-image s3-image prometheus-image

# Start the HA cluster and wait for a leader and three TaskManagers.
up: images pki
	$(COMPOSE) up -d
	COMPOSE="$(COMPOSE)" deploy/wait-ready.sh

# The compose cluster's certificates and tokens, made once into deploy/pki
# (not committed; remove the directory for new ones): a development CA and
# a certificate per service and for the CLI (`weir certs init`), and a read
# and an admin token, random, in deploy/pki/tokens (the JobManagers'
# --auth-token-file) and deploy/pki/{read,admin}.token.
PKI       := deploy/pki
PKI_HOSTS := jobmanager-1,jobmanager-2,taskmanager-1,taskmanager-2,taskmanager-3,etcd-1,etcd-2,etcd-3,prometheus
pki: build
	test -f $(PKI)/ca.pem || $(BIN)/weir certs init $(PKI) --hosts $(PKI_HOSTS)
	test -f $(PKI)/tokens || ( umask 077 && \
	  od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > $(PKI)/read.token && \
	  od -An -N16 -tx1 /dev/urandom | tr -d ' \n' > $(PKI)/admin.token && \
	  printf 'read %s\nadmin %s\n' "$$(cat $(PKI)/read.token)" "$$(cat $(PKI)/admin.token)" > $(PKI)/tokens )

# Stop the cluster; containers, network and volumes are removed.
down:
	$(COMPOSE) down -v --remove-orphans

# Submit the running-sum job to a fresh compose cluster, kill a TaskManager
# and the leader JobManager under it, check the output is exactly once and
# that Prometheus scraped every target and saw checkpoints complete. A few
# minutes; it uses its own project name and random host ports, so it runs
# beside a cluster from `make up`, and removes everything it created.
compose-test: images pki
	WEIR_COMPOSE_TEST=1 COMPOSE_CMD="$(COMPOSE_CMD)" $(GO) test -count=1 -v -timeout 15m ./e2e/compose

# The fault matrix (cmd/weir-faults): each fault of docs/reliability.md
# once on a compose cluster of its own (project weir-faults, random host
# ports), healed, with both jobs' output checked exactly once; rewrites the
# matrix's table in docs/reliability.md. About 35 minutes; runs as root
# (nsenter, iptables). FAULT_ROWS=tm-kill,etcd-quorum-loss runs only those.
FAULT_ROWS ?=
faults: images pki
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/weir-faults ./cmd/weir-faults
	$(BIN)/weir-faults -mode matrix $(if $(FAULT_ROWS),-rows $(FAULT_ROWS))

# The soak: both jobs for SOAK while faults of every kind, and kills, come
# and go at random (SOAK_SEED fixes them; 0 picks one and the report names
# it), then the checkers; rewrites the soak's section of docs/reliability.md.
# Bounded: SOAK plus at most about 25 minutes for the jobs to finish.
SOAK      ?= 30m
SOAK_SEED ?= 0
soak: images pki
	CGO_ENABLED=0 $(GO) build -trimpath -o $(BIN)/weir-faults ./cmd/weir-faults
	$(BIN)/weir-faults -mode soak -duration $(SOAK) -seed $(SOAK_SEED)

# A regular SQL join on a key space that never repeats, with and without
# table.exec.state.ttl, for SQL_TTL_SOAK: the state with the TTL must
# stay flat, the other grow (the test's short run is part of make test).
SQL_TTL_SOAK ?= 5m
soak-sql-ttl: versitygw
	WEIR_SQL_TTL_SOAK=$(SQL_TTL_SOAK) $(GO) test -race -tags $(TEST_TAGS) -count=1 -timeout 3h -run 'TestSQLStateTTLFlat$$' -v ./e2e/

# A keyed sum on a key space that never repeats, with and without a state
# TTL, on the heap and on Pebble, for STATE_TTL_SOAK: the state with the
# TTL must stay flat, the other grow (the test's short run is part of make
# test).
STATE_TTL_SOAK ?= 5m
soak-state-ttl: versitygw
	WEIR_STATE_TTL_SOAK=$(STATE_TTL_SOAK) $(GO) test -race -tags $(TEST_TAGS) -count=1 -timeout 3h -run 'TestStateTTLFlat$$' -v ./e2e/

# The autoscaler's step test at full length: a Kafka job whose input steps
# 5x up for 30 minutes of constant load and back down, scaled by its
# autoscaler alone; it fails on a rescale under constant load once the lag
# recovered, on lost or duplicated output, or on a missed scale-down (the
# short run, about 3 minutes, is part of make test). About 45 minutes.
autoscaler-step:
	WEIR_AUTOSCALER_STEP=long $(GO) test -tags $(TEST_TAGS) -count=1 -timeout 70m -run 'TestAutoscalerStep$$' -v ./e2e/

clean:
	rm -rf $(BIN)

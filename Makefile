# pulumi-etcd-rollout. The two commands a newcomer needs: `make demo` (a real rollout on the local cluster)
# and `make test` (everything CI runs). Every tool is built pinned into .tools/ by tools/build.sh.
SHELL := /bin/bash
ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))
TOOLS_DIR ?= $(ROOT)/.tools
export TOOLS_DIR
export PATH := $(TOOLS_DIR)/bin:$(PATH)
GO_TEST ?= go test -count=1

.PHONY: tools tools-pulumi cluster-up cluster-down test test-unit

tools:
	tools/build.sh cluster

tools-pulumi:
	tools/build.sh pulumi

test-unit:
	$(GO_TEST) ./rollout/... ./provider/... ./cmd/...

# Before a release: the schedule checker's long mode, 100,000 schedules on virtual time (about 25 minutes on
# 2 cores); its count and findings go to docs/reliability.md.
.PHONY: test-schedules-long
test-schedules-long:
	ROLLOUT_SCHEDULES=100000 $(GO_TEST) -timeout 90m -run 'TestSchedules$$' ./rollout/

test: tools test-unit test-harness check-sdks test-e2e

# --- Local cluster (tests/cluster, tests/harness): a real kube-apiserver + StatefulSet controller + kwok
# node, with real etcd members behind the pods of opted-in StatefulSets (bin/etcd-members).
.PHONY: etcd-members test-harness
HARNESS_TEST_FLAGS ?= -v -timeout 15m

etcd-members:
	go build -o bin/etcd-members ./tests/harness/cmd/etcd-members

cluster-up: tools etcd-members
	tests/cluster/up.sh

cluster-down:
	tests/cluster/down.sh

# The harness's own tests: unit tests, then the integration tests against the running cluster (brought up
# first if it is not). One of them starts and stops a second, private cluster to check cluster-down.
test-harness: cluster-up
	$(GO_TEST) $(HARNESS_TEST_FLAGS) -tags integration ./tests/harness/...

# --- The Pulumi provider (provider/, cmd/pulumi-resource-etcd-rollout), schema.json, the generated SDKs
# (sdk/: never edit by hand, regenerate with `make sdks`), and the end-to-end tests of examples/ (tests/e2e).
.PHONY: provider schema sdks check-sdks test-provider test-e2e node-deps python-deps
# The one place the version lives: VERSION (make dist, the provider binary, and so schema.json and the SDKs).
PROVIDER_VERSION ?= $(shell cat $(ROOT)/VERSION)
PROVIDER_BIN := $(ROOT)/bin/pulumi-resource-etcd-rollout
PULUMI_BIN := $(TOOLS_DIR)/bin/pulumi
# Every pulumi command runs offline: its own home in .tools, no update check, no plugin downloads.
PULUMI_RUN := env PULUMI_HOME=$(TOOLS_DIR)/pulumi-home PULUMI_SKIP_UPDATE_CHECK=true \
	PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true $(PULUMI_BIN)
SDK_GO_MODULE := github.com/etcd-rollout/pulumi-etcd-rollout/sdk
NODE_DIR := $(TOOLS_DIR)/node
PY_VENV := $(TOOLS_DIR)/venv
# PyPI's newest pulumi for this Python is 3.272.0 (3.276.0, the CLI's version, is not served there).
PY_PULUMI_VERSION ?= 3.272.0

provider:
	go build -trimpath -ldflags "-X github.com/etcd-rollout/pulumi-etcd-rollout/provider.Version=$(PROVIDER_VERSION)" \
		-o $(PROVIDER_BIN) ./cmd/pulumi-resource-etcd-rollout

$(PULUMI_BIN):
	tools/build.sh pulumi

schema: provider $(PULUMI_BIN)
	$(PULUMI_RUN) package get-schema $(PROVIDER_BIN) > schema.json.tmp
	mv schema.json.tmp schema.json

# `pulumi package gen-sdk` hands generation to the language plugins (pulumi-language-nodejs, ...), which the Go
# module proxy does not serve; provider/cmd/gen-sdk (its own module, pinned to the CLI's pkg/v3) calls the same
# generators of pkg/v3/codegen. The Go SDK gets its own module so consumers do not inherit the provider's
# dependencies.
GEN_SDK := $(TOOLS_DIR)/bin/gen-sdk
$(GEN_SDK): provider/cmd/gen-sdk/main.go provider/cmd/gen-sdk/go.mod provider/cmd/gen-sdk/go.sum
	cd provider/cmd/gen-sdk && go build -o $(GEN_SDK) .

sdks: schema $(GEN_SDK)
	for lang in nodejs python go; do $(GEN_SDK) -schema schema.json -language $$lang -out sdk/$$lang || exit 1; done
	printf 'module $(SDK_GO_MODULE)\n\ngo 1.26\n\nrequire github.com/pulumi/pulumi/sdk/v3 v3.276.0\n' > sdk/go.mod
	cd sdk && go mod tidy

# Release artifacts of VERSION into dist/: the plugin and CLI tarballs for linux and darwin (amd64, arm64) with
# checksums.txt, the npm tarball, the Python wheel and sdist (tools/dist.sh says what each is for).
.PHONY: dist
dist: node-deps
	tools/dist.sh $(PROVIDER_VERSION)

# The release files for this machine's platform only (the plugin and CLI tarballs of GOOS-GOARCH, the npm
# tarball, the wheel): what the install test installs.
.PHONY: dist-host
dist-host: node-deps
	DIST_PLATFORMS=$$(go env GOOS)-$$(go env GOARCH) tools/dist.sh $(PROVIDER_VERSION)

# A stack outside this repository (tests/e2e/install_test.go): the dist-host files installed into an empty
# directory, then a TypeScript program, a Python program and a Pulumi YAML project (the plain CLI) each roll a
# cluster.
.PHONY: test-install
test-install: dist-host tools-pulumi python-deps cluster-up
	cd tests/e2e && $(GO_TEST) $(E2E_TEST_FLAGS) -tags 'e2e install' -run '^TestInstall' ./...

test: test-install

# CI: the committed schema and SDKs must be exactly what the provider generates.
check-sdks: sdks
	git diff --exit-code -- schema.json sdk
	@untracked=$$(git status --porcelain --untracked-files=all -- schema.json sdk); \
	if [ -n "$$untracked" ]; then echo "generated files not committed:"; echo "$$untracked"; exit 1; fi

# CI: the committed Go SDK as a Go user gets it: sdk/go vetted, and examples/go (which takes the SDK through a
# replace of ../../sdk) vetted and built against it (check-sdks has made sure the committed SDK is what the
# provider generates).
.PHONY: check-go-sdk
check-go-sdk:
	cd sdk && go vet ./...
	cd examples/go && go vet ./... && go build ./...

test: check-go-sdk

test-provider:
	$(GO_TEST) ./provider/... ./cmd/pulumi-resource-etcd-rollout/...

# npm packages, pinned by tests/e2e/node/package-lock.json, installed into .tools/node; the generated TS SDK is
# compiled there against them and installed as node_modules/pulumi-etcd-rollout.
node-deps: $(NODE_DIR)/.installed
$(NODE_DIR)/.installed: tests/e2e/node/package.json tests/e2e/node/package-lock.json tests/e2e/node/driver.js $(wildcard sdk/nodejs/*.ts sdk/nodejs/*.json)
	mkdir -p $(NODE_DIR)
	cp tests/e2e/node/package.json tests/e2e/node/package-lock.json tests/e2e/node/driver.js $(NODE_DIR)/
	cd $(NODE_DIR) && npm ci --ignore-scripts --no-audit --no-fund
	rm -rf $(NODE_DIR)/sdk-build && cp -r sdk/nodejs $(NODE_DIR)/sdk-build
	cd $(NODE_DIR)/sdk-build && ../node_modules/.bin/tsc && cp package.json README.md bin/ 2>/dev/null; \
		test -f bin/index.js
	rm -rf $(NODE_DIR)/node_modules/pulumi-etcd-rollout && cp -r $(NODE_DIR)/sdk-build/bin $(NODE_DIR)/node_modules/pulumi-etcd-rollout
	touch $@

# PyPI packages, pinned by tests/e2e/python/requirements.txt (a pip freeze of requirements.in), in a virtualenv
# in .tools; the generated Python SDK is installed into it.
python-deps: $(PY_VENV)/.installed
$(PY_VENV)/.installed: tests/e2e/python/requirements.txt $(wildcard sdk/python/pyproject.toml)
	python3 -m venv $(PY_VENV)
	$(PY_VENV)/bin/pip install --quiet --no-deps -r tests/e2e/python/requirements.txt
	$(PY_VENV)/bin/pip install --quiet --no-deps ./sdk/python
	touch $@

# The examples end to end on the local cluster: the real pulumi CLI, file backend, inline programs.
E2E_TEST_FLAGS ?= -v -timeout 80m
test-e2e: provider tools-pulumi node-deps python-deps cluster-up
	cd tests/e2e && $(GO_TEST) $(E2E_TEST_FLAGS) -tags e2e ./...

# --- Rollout engine (rollout/, cmd/etcd-rollout, tests/engine): the CLI, its integration tests on the local
# cluster, and the demo (a real 3-member rollout with live progress).
.PHONY: etcd-rollout test-engine demo
ENGINE_TEST_FLAGS ?= -v -timeout 20m -parallel 3
KUBECONFIG_LOCAL := $(ROOT)/tests/.run/kubeconfig

etcd-rollout:
	go build -ldflags "-X main.version=$(PROVIDER_VERSION)" -o bin/etcd-rollout ./cmd/etcd-rollout

# The CLI as a kubectl plugin: `kubectl etcd-rollout status|plan|run|unlock` runs kubectl-etcd_rollout from PATH.
# `make kubectl-plugin PREFIX=$HOME/.local` installs it as $(PREFIX)/bin/kubectl-etcd_rollout.
.PHONY: kubectl-plugin
PREFIX ?= /usr/local
kubectl-plugin:
	mkdir -p $(PREFIX)/bin
	go build -ldflags "-X main.version=$(PROVIDER_VERSION)" -o $(PREFIX)/bin/kubectl-etcd_rollout ./cmd/etcd-rollout
	@echo "installed $(PREFIX)/bin/kubectl-etcd_rollout; with $(PREFIX)/bin on PATH: kubectl etcd-rollout --help"

test-engine: cluster-up
	$(GO_TEST) $(ENGINE_TEST_FLAGS) -tags integration ./tests/engine/...

test: test-engine

# The README's first command: examples/yaml with the plain pulumi CLI in a project directory (tools/demo.sh), on
# the local cluster: create, a pod-template change previewed with its plan, the rolling up, the outputs. The
# cool-down is shortened from the default 30 s so the demo stays short.
DEMO_COOLDOWN_SECONDS ?= 2
export DEMO_COOLDOWN_SECONDS
demo: provider tools-pulumi cluster-up etcd-rollout
	tools/demo.sh

# --- Reliability and security (tests/faults, deploy/rbac): the fault matrix with a linearizability check of a
# background client's history (porcupine), bad inputs, least-privilege RBAC, secrets that never leak.
.PHONY: test-faults
FAULTS_TEST_FLAGS ?= -v -timeout 40m
test-faults: cluster-up provider tools-pulumi node-deps python-deps etcd-rollout
	$(GO_TEST) $(FAULTS_TEST_FLAGS) -tags faults ./tests/faults/...
	cd tests/e2e && $(GO_TEST) $(FAULTS_TEST_FLAGS) -tags 'e2e faults' -run '^TestFaults' ./...

test: test-faults

# --- Benchmarks (bench/, its own module): default StatefulSet roll vs the job-like policy vs the engine, side by
# side in one run on the local cluster. Writes bench/results.md and bench/*.png; raw data in bench/out/.
.PHONY: bench
bench: cluster-up
	bash bench/run.sh

# The published benchmark figures (docs/benchmarks.md) are bench/results.md's, copied between
# <!-- bench:begin --> and <!-- bench:end -->. bench-readme copies them (bench/run.sh does it after every run);
# check-bench-readme fails when the page differs, and first makes sure the check can fail: a copy of the
# page with one figure changed must be refused.
BENCH_PAGE := docs/benchmarks.md
.PHONY: bench-readme check-bench-readme
bench-readme:
	bench/readme-sync.sh

check-bench-readme:
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	sed '/<!-- bench:begin -->/,/<!-- bench:end -->/s/| \*\*\([0-9]\)/| **9\1/' $(BENCH_PAGE) > "$$tmp/page.md" && \
	! cmp -s $(BENCH_PAGE) "$$tmp/page.md" && \
	! BENCH_README="$$tmp/page.md" bench/readme-sync.sh --check 2>/dev/null || \
	{ echo "check-bench-readme: the check accepted a page with a changed figure"; exit 1; }
	bench/readme-sync.sh --check

test: check-bench-readme

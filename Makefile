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

test: tools test-unit test-harness

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

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

test: tools test-unit

#!/usr/bin/env bash
# bench/run.sh - `make bench`: the default StatefulSet roll, the old Job's policy and the engine, side by side
# on the local cluster (make cluster-up), over every scenario of bench/scenarios.go. Writes bench/results.md and
# bench/bench-<scenario>.png, then copies results.md's summary into docs/benchmarks.md (bench/readme-sync.sh); raw data in
# bench/out/ (ignored by git).
#
# Knobs (environment):
#   BENCH_RUNS=5           rollouts per strategy per scenario (heavy ×0.4, ten-clusters ×0.6 (one of them profiled,
#                          and so left out of the cost table), rounded, at least 1):
#                          five strategies × seven scenarios fit in about 40 minutes on 2 cores
#   BENCH_SCENARIOS=all    comma-separated: easy,heavy-immediate,heavy-probe,hung,five,mtls,mtls-peerca,ten-clusters,emptydir,one-member,ten-minor
#   BENCH_COOLDOWN=1s      cool-down of the job-like and engine strategies (the engine's default is 30s)
#   BENCH_RESULTS=results.md   where the table goes (relative to bench/); a smoke run can write elsewhere
#   BENCH_OUT=out          raw data directory (relative to bench/)
#   BENCH_DEADLINE=        start no round of rollouts after this (RFC 3339 instant, or a duration such as 30m);
#                          what was cut is written at the top of results.md
#   BENCH_STABLE_FOR=      override the engine strategies' canary stability window (default: the engine's 3s),
#                          only to measure what it costs; refused with the committed results.md, and such results
#                          say so at the top and count no target
#   BENCH_STRATEGIES=all   comma-separated: default,default-hardened,job-like,engine,engine-cd0; a selection only
#                          measures those strategies (an engine's cost while changing it): refused with the
#                          committed results.md, which compares them all
# Only the report from existing raw data: BENCH_REPORT_ONLY=1.
set -euo pipefail
cd "$(dirname "$0")"
if [ -n "${BENCH_STABLE_FOR:-}" ] && [ "${BENCH_RESULTS:-results.md}" = results.md ]; then
  echo "BENCH_STABLE_FOR measures a setting that is not the engine's default: write the results elsewhere (BENCH_RESULTS=...)" >&2
  exit 2
fi
if [ "${BENCH_STRATEGIES:-all}" != all ] && [ "${BENCH_RESULTS:-results.md}" = results.md ]; then
  echo "BENCH_STRATEGIES measures some strategies only: write the results elsewhere (BENCH_RESULTS=...)" >&2
  exit 2
fi
mkdir -p out
go build -o out/bench . && go build -o out/bench-engine ./cmd/bench-engine
args=(-runs "${BENCH_RUNS:-5}" -scenarios "${BENCH_SCENARIOS:-all}" -cooldown "${BENCH_COOLDOWN:-1s}"
  -results "${BENCH_RESULTS:-results.md}" -out "${BENCH_OUT:-out}" -strategies "${BENCH_STRATEGIES:-all}")
if [ -n "${BENCH_DEADLINE:-}" ]; then args+=(-deadline "$BENCH_DEADLINE"); fi
if [ -n "${BENCH_STABLE_FOR:-}" ]; then args+=(-stable-for "$BENCH_STABLE_FOR"); fi
if [ "${BENCH_REPORT_ONLY:-0}" = 1 ]; then args+=(-report-only); fi
out/bench "${args[@]}"
# docs/benchmarks.md's figures are results.md's: copy the summary over (a run that writes its table elsewhere,
# such as a smoke run with BENCH_RESULTS, leaves the page alone).
if [ "${BENCH_RESULTS:-results.md}" = results.md ]; then ./readme-sync.sh; fi

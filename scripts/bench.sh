#!/usr/bin/env bash
# Runs converge and cilium/statedb/reconciler side by side on the same
# workloads (see benchmarks/README.md) and prints the table of medians and
# ratios. Every argument is passed on to the program:
#
#   scripts/bench.sh                  # everything, 3 pairs of runs (~13 min on 2 cores, as root with routes; 21 with -pairs 5)
#   scripts/bench.sh -quick           # smaller sizes, under a minute
#   scripts/bench.sh -only latency -pairs 5
#   scripts/bench.sh -json > results.jsonl
#
# Progress goes to stderr, the table (or JSON) to stdout. Not part of
# scripts/test.sh: timings do not belong in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
exec go run ./benchmarks "$@"

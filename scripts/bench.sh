#!/usr/bin/env bash
# Runs converge and cilium/statedb/reconciler side by side on the same
# workloads (see benchmarks/README.md) and prints the table of medians and
# ratios. Every argument is passed on to the program:
#
#   scripts/bench.sh                  # everything, 3 pairs of runs (~18 min on 2 cores as root with routes, then ~4 for controller-runtime's rows)
#   scripts/bench.sh -quick           # smaller sizes, about two minutes, and 30 s for controller-runtime's rows
#   scripts/bench.sh -only latency -pairs 5
#   scripts/bench.sh -json > results.jsonl
#
# Progress goes to stderr, the table (or JSON) to stdout. Not part of
# scripts/test.sh: timings do not belong in CI.
#
# Then, unless -only names other workloads, the waiting-order workloads
# (startup+changes, noisy-tenant, hung-target) against controller-runtime's
# priority queue, from the nested benchmarks/crqueue module (the core module
# never requires controller-runtime): about 4 minutes, 30 s with -quick;
# -quick, -pairs, -json, -only, -run-timeout and the workloads' size flags
# are passed on to it. Then the etcd source's rows, which
# live in the nested etcd module (the core benchmarks cannot import it):
# Go benchmarks against an embedded etcd on 127.0.0.1, about 30 s. And
# the Kubernetes source's rows (nested k8s module): Go benchmarks against
# an in-process API server, a few minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
go run ./benchmarks "$@"

only=""
json=""
prev=""
crqueue_args=()
for arg in "$@"; do
	case "$prev" in -only | --only) only="$arg" ;; esac
	case "$arg" in
	-only=* | --only=*) only="${arg#*=}" ;;
	-json | --json | -json=true | --json=true) json=1 ;;
	esac
	# The flags benchmarks/crqueue knows, with their values.
	case "$prev" in
	-only | --only | -pairs | --pairs | -run-timeout | --run-timeout | -backlog-objects | --backlog-objects | \
		-backlog-samples | --backlog-samples | -hung-objects | --hung-objects | -hung-window | --hung-window)
		crqueue_args+=("$prev" "$arg") ;;
	esac
	case "$arg" in
	-quick | --quick | -quick=* | --quick=* | -json | --json | -json=* | --json=* | -only=* | --only=* | -pairs=* | --pairs=* | \
		-run-timeout=* | --run-timeout=* | -backlog-objects=* | --backlog-objects=* | -backlog-samples=* | --backlog-samples=* | \
		-hung-objects=* | --hung-objects=* | -hung-window=* | --hung-window=*)
		crqueue_args+=("$arg") ;;
	esac
	prev="$arg"
done
if [ -z "$only" ] || [[ "startup+changes" =~ $only ]] || [[ "noisy-tenant" =~ $only ]] || [[ "hung-target" =~ $only ]]; then
	echo "== converge vs controller-runtime's priority queue (benchmarks/crqueue)" >&2
	(cd benchmarks/crqueue && go run . "${crqueue_args[@]}")
fi
if [ -z "$only" ] || [[ "etcd" =~ $only ]]; then
	echo "== etcd source (etcd/etcdsource, Go benchmarks)" >&2
	if [ -n "$json" ]; then
		# Keep stdout JSON lines only.
		(cd etcd && go test -run '^$' -bench . -benchtime 1x ./etcdsource/) >&2
	else
		(cd etcd && go test -run '^$' -bench . -benchtime 1x ./etcdsource/)
	fi
fi
if [ -z "$only" ] || [[ "k8s" =~ $only ]]; then
	echo "== Kubernetes source (k8s/k8ssource, Go benchmarks)" >&2
	if [ -n "$json" ]; then
		(cd k8s && go test -run '^$' -bench . -benchtime 1x -timeout 30m ./k8ssource/) >&2
	else
		(cd k8s && go test -run '^$' -bench . -benchtime 1x -timeout 30m ./k8ssource/)
	fi
	echo "== Sharding on Kubernetes Leases (k8s/lease, Go benchmark)" >&2
	if [ -n "$json" ]; then
		(cd k8s && go test -run '^$' -bench ShardWorkRate -benchtime 1x -count 3 -timeout 10m ./lease/) >&2
	else
		(cd k8s && go test -run '^$' -bench ShardWorkRate -benchtime 1x -count 3 -timeout 10m ./lease/)
	fi
fi
if [ -z "$only" ] || [[ "otel" =~ $only ]]; then
	# The observer hook's OpenTelemetry adapter (nested otel module): noop-1m's
	# shape off, over the API's no-op provider, never sampling (the SDK's
	# sampler, and the adapter's head sampler), the head sampler taking one
	# attempt in 100 into memory, and sampling everything into memory (at
	# 100k objects: a million spans in memory would measure the exporter),
	# then the isolated-change latency off and on. The modes alternate,
	# three rounds.
	echo "== observer hook: OpenTelemetry adapter (otel, Go benchmarks)" >&2
	otel_bench() {
		# -count repeats a sub-benchmark back to back: loop instead, so
		# that the modes alternate.
		for _ in 1 2 3; do
			(cd otel && go test -run '^$' -benchtime 1x -timeout 30m \
				-bench 'BenchmarkNoop1M/(off|otel-noop|otel-never|otel-head-never|otel-head-1in100-memory)$|BenchmarkIsolatedChange' . &&
				CONVERGE_NOOP_OBJECTS=100000 go test -run '^$' -benchtime 1x -bench 'BenchmarkNoop1M/otel-always' .)
		done
	}
	if [ -n "$json" ]; then otel_bench >&2; else otel_bench; fi
fi

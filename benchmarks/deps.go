package main

import (
	"context"
	"flag"
	"fmt"
	"time"
)

// Issue 51's rows: what Config.DependsOn costs and what it saves. Every
// dependency workload runs converge only (statedb's reconciler has no
// dependencies); the second column is converge without DependsOn, the
// way one waits for a dependency without it (Update returning
// RetryAfter), statedb's reconciler doing the same with its backoff, or
// the goal.

// depsSizes are the dependency workloads' knobs.
type depsSizes struct {
	releaseSamples int // deps/release: releases measured per run
	forestObjects  int // deps/forest-*: objects
	forestRoots    int // deps/forest-*: roots (depth is depsForestDepth)
	edgeObjects    int // deps/one-edge: objects, each but the first batch depending on one other
	chainObjects   int // deps/chain: the middle length (half and double run too)
}

const (
	depsForestDepth       = 5  // levels, roots included
	depsForestConcurrency = 64 // Config.Concurrency of the forest
	edgeBytesGoal         = 64 // bytes of live heap per edge, at most
)

func fullDepsSizes() depsSizes {
	return depsSizes{releaseSamples: 10_000, forestObjects: 100_000, forestRoots: 1000, edgeObjects: 1_000_000, chainObjects: 10_000}
}

func quickDepsSizes() depsSizes {
	return depsSizes{releaseSamples: 1000, forestObjects: 20_000, forestRoots: 200, edgeObjects: 100_000, chainObjects: 2000}
}

// fields maps each dependency size flag's name to its field, into m.
func (s *depsSizes) fields(m map[string]any) {
	m["deps-release-samples"] = &s.releaseSamples
	m["deps-forest-objects"] = &s.forestObjects
	m["deps-forest-roots"] = &s.forestRoots
	m["deps-edge-objects"] = &s.edgeObjects
	m["deps-chain-objects"] = &s.chainObjects
}

// flags registers the dependency size flags on fs.
func (s *depsSizes) flags(fs *flag.FlagSet) {
	fs.IntVar(&s.releaseSamples, "deps-release-samples", s.releaseSamples, "deps/release: releases measured per run")
	fs.IntVar(&s.forestObjects, "deps-forest-objects", s.forestObjects, "deps/forest-*: objects in the forest")
	fs.IntVar(&s.forestRoots, "deps-forest-roots", s.forestRoots, "deps/forest-*: roots of the forest (depth 5)")
	fs.IntVar(&s.edgeObjects, "deps-edge-objects", s.edgeObjects, "deps/one-edge: objects, each depending on one other")
	fs.IntVar(&s.chainObjects, "deps-chain-objects", s.chainObjects, "deps/chain: the middle chain's length (half and double run too)")
}

// check says what is wrong with s.
func (s depsSizes) check() error {
	switch {
	case s.releaseSamples < 1, s.edgeObjects < 1:
		return fmt.Errorf("-deps-release-samples and -deps-edge-objects must be at least 1")
	case s.chainObjects < 2:
		return fmt.Errorf("-deps-chain-objects must be at least 2")
	case s.forestRoots < 1 || s.forestObjects < s.forestRoots*depsForestDepth:
		return fmt.Errorf("-deps-forest-objects must be at least %d times -deps-forest-roots, which must be at least 1", depsForestDepth)
	}
	return nil
}

func (s depsSizes) String() string {
	return fmt.Sprintf("deps: release x %d, forest %s (%s roots, depth %d, c%d), one-edge %s, chain %s/%s/%s",
		s.releaseSamples, countLabel(s.forestObjects), countLabel(s.forestRoots), depsForestDepth, depsForestConcurrency,
		countLabel(s.edgeObjects), countLabel(s.chainObjects/2), countLabel(s.chainObjects), countLabel(2*s.chainObjects))
}

// depsWorkloads are issue 51's workloads.
func depsWorkloads(sz sizes) []workload {
	return []workload{
		depsReleaseWorkload(sz),
		requiresReleaseWorkload(sz),
		depsForestWorkload(sz, 0),
		depsForestWorkload(sz, time.Millisecond),
		depsEdgeWorkload(sz),
		depsChainWorkload(sz),
	}
}

// Metrics of the dependency workloads.
const (
	metricDoneSeconds     = "done-s"
	metricDeleteSeconds   = "delete-s"
	metricDonePerObject   = "done-us/object"
	metricDeletePerObject = "delete-us/object"
	metricLiveBytes       = "live-bytes"
	metricRetries         = "retries"

	unitMicrosPerObject = "µs/object"
	unitBytesPerEdge    = "bytes/edge"
)

// depsReleaseWorkload is deps/release: from a dependency's Update
// returning (its Done then committed) to its Blocked dependent's Update
// starting, one pair at a time on an idle reconciler.
func depsReleaseWorkload(sz sizes) workload {
	run := func(ctx context.Context) (measure, error) { return runDepsRelease(ctx, sz) }
	atMost := func(ms float64) func(o, _ float64) bool { return func(o, _ float64) bool { return o <= ms } }
	p99 := goalRow("deps/release/p99", unitMillis, true, "converge", metricP99, 1, "<=1ms", atMost(1))
	return workload{
		name:     "deps/release",
		variants: []variant{{name: "converge", side: sideConverge, run: run}},
		rows: []rowSpec{
			{name: "deps/release/p50", unit: unitMillis, lowerBetter: true, reference: "goal p99",
				derive: func(med func(string, string) float64) (float64, float64) { return med("converge", metricP50), 1 }},
			p99,
			{name: "deps/release/max", unit: unitMillis, lowerBetter: true, reference: "goal p99",
				derive: func(med func(string, string) float64) (float64, float64) { return med("converge", metricMax), 1 }},
		},
	}
}

// depsForestWorkload is deps/forest-<delay>: a forest reconciled at
// Concurrency 64 with DependsOn, without dependencies, and with each
// Update returning RetryAfter(100ms, nil) while its parent is not Done;
// at 0 ms also statedb's reconciler returning an error instead.
func depsForestWorkload(sz sizes, delay time.Duration) workload {
	name := fmt.Sprintf("deps/forest-%dms", delay.Milliseconds())
	run := func(mode forestMode) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runDepsForest(ctx, sz, delay, mode) }
	}
	w := workload{
		name: name,
		variants: []variant{
			{name: "converge-deps", side: sideConverge, run: run(forestDeps)},
			{name: "converge-none", side: sideConverge, run: run(forestNone)},
			{name: "converge-retry", side: sideConverge, run: run(forestRetry)},
		},
		rows: []rowSpec{
			{name: name + "/vs-none", unit: unitSeconds, lowerBetter: true, ours: "converge-deps", theirs: "converge-none",
				metric: metricDoneSeconds, reference: "no dependencies",
				goal: &goal{desc: "<=1.2x no dependencies", met: func(o, t float64) bool { return o <= 1.2*t }}},
			{name: name + "/cpu-vs-none", unit: unitCPUMicrosPerObject, lowerBetter: true, ours: "converge-deps", theirs: "converge-none",
				metric: metricCPUPerObject, reference: "no dependencies"},
			{name: name + "/vs-retry", unit: unitSeconds, lowerBetter: true, ours: "converge-deps", theirs: "converge-retry",
				metric: metricDoneSeconds, reference: "RetryAfter 100ms",
				goal: &goal{desc: ">=10x faster than RetryAfter", met: func(o, t float64) bool { return 10*o <= t }}},
			{name: name + "/retry-updates", unit: unitTimes, ours: "converge-retry", theirs: "converge-retry",
				metric: metricRetries, reference: "the same"},
		},
	}
	if delay == 0 {
		// statedb reconciles one object at a time: at 1 ms a forest of
		// 100k objects would take minutes, so it runs at 0 ms only.
		w.variants = append(w.variants, variant{name: "statedb-retry", side: sideStatedb, run: run(forestStatedb)})
		w.rows = append(w.rows, rowSpec{name: name + "/vs-statedb-retry", unit: unitSeconds, lowerBetter: true,
			ours: "converge-deps", theirs: "statedb-retry", metric: metricDoneSeconds})
	}
	return w
}

// depsEdgeWorkload is deps/one-edge: noop-1m's load with every object
// (but the first insert batch, Done before the clock starts) depending on
// one other, against the same load without DependsOn: what an edge costs
// in time and in live heap. "prev" depends on the object one batch
// before, often not Done yet (Blocked, then released); "done" on one of
// the first batch, Done already (never Blocked): the graph alone.
func depsEdgeWorkload(sz sizes) workload {
	n := sz.deps.edgeObjects
	edges := float64(max(n-sz.insertBatch, 1))
	name := "deps/one-edge-" + countLabel(n)
	run := func(mode edgeMode) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runDepsEdges(ctx, sz, mode) }
	}
	perEdge := func(variant, metric string) func(med func(string, string) float64) (float64, float64) {
		return func(med func(string, string) float64) (float64, float64) {
			return (med(variant, metric) - med("converge-none", metric)) / edges, edgeBytesGoal
		}
	}
	w := workload{
		name: name,
		variants: []variant{
			{name: "converge-none", side: sideConverge, run: run(edgeNone)},
			{name: "converge-prev", side: sideConverge, run: run(edgePrev)},
			{name: "converge-done", side: sideConverge, run: run(edgeDone)},
		},
	}
	for _, v := range []string{"prev", "done"} {
		variant, rname := "converge-"+v, name+"/"+v
		w.rows = append(w.rows,
			rowSpec{name: rname, unit: unitObjectsPerSec, ours: variant, theirs: "converge-none", metric: metricThroughput, reference: "no DependsOn"},
			rowSpec{name: rname + "/cpu", unit: unitCPUMicrosPerObject, lowerBetter: true, ours: variant, theirs: "converge-none",
				metric: metricCPUPerObject, reference: "no DependsOn"},
			rowSpec{name: rname + "/live-bytes-per-edge", unit: unitBytesPerEdge, lowerBetter: true, reference: "goal", derive: perEdge(variant, metricLiveBytes),
				goal: &goal{desc: "<=64 B/edge", met: func(o, t float64) bool { return o <= t }}},
			rowSpec{name: rname + "/alloc-bytes-per-edge", unit: unitBytesPerEdge, lowerBetter: true, reference: "live goal", derive: perEdge(variant, metricBytes)})
	}
	return w
}

// depsChainWorkload is deps/chain: chains of half, once and twice
// chainObjects, each object depending on the one before, reconciled and
// then deleted (the deletes go in reverse: leaves first); per object, the
// longer chains must cost about what the shortest does.
func depsChainWorkload(sz sizes) workload {
	n := sz.deps.chainObjects
	lengths := []int{n / 2, n, 2 * n}
	w := workload{name: "deps/chain"}
	vname := func(m int) string { return "converge-" + countLabel(m) }
	for _, m := range lengths {
		w.variants = append(w.variants, variant{name: vname(m), side: sideConverge,
			run: func(ctx context.Context) (measure, error) { return runDepsChain(ctx, sz, m, true) }})
	}
	w.variants = append(w.variants, variant{name: "converge-none", side: sideConverge,
		run: func(ctx context.Context) (measure, error) { return runDepsChain(ctx, sz, n, false) }})
	mid := vname(n)
	w.rows = append(w.rows,
		rowSpec{name: "deps/chain/" + countLabel(n) + "/done", unit: unitSeconds, lowerBetter: true, ours: mid, theirs: "converge-none",
			metric: metricDoneSeconds, reference: "no DependsOn"},
		rowSpec{name: "deps/chain/" + countLabel(n) + "/delete", unit: unitSeconds, lowerBetter: true, ours: mid, theirs: "converge-none",
			metric: metricDeleteSeconds, reference: "no DependsOn"})
	linear := &goal{desc: "<=1.5x the shortest's", met: func(o, t float64) bool { return o <= 1.5*t }}
	for _, metric := range []string{metricDonePerObject, metricDeletePerObject} {
		for _, m := range lengths[1:] {
			w.rows = append(w.rows, rowSpec{name: fmt.Sprintf("deps/chain/%s/%s", countLabel(m), metric), unit: unitMicrosPerObject,
				lowerBetter: true, ours: vname(m), theirs: vname(lengths[0]), metric: metric,
				reference: countLabel(lengths[0]) + " chain", goal: linear})
		}
	}
	return w
}

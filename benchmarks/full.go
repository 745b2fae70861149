package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/converge-go/converge/benchmarks/internal/bench"
)

// fullWorkload is full: the cost of one full reconciliation (a prune and
// a refresh of every object) of a large table.
func fullWorkload(sz sizes) workload {
	run := func(side string) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runFull(ctx, side, sz) }
	}
	return workload{
		name: "full",
		variants: []variant{
			{name: "converge", side: sideConverge, run: run(sideConverge)},
			{name: "statedb", side: sideStatedb, run: run(sideStatedb)},
		},
		rows: []rowSpec{
			{name: "full/duration", unit: unitSeconds, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricSeconds,
				goal: &goal{desc: "<=statedb", met: func(o, t float64) bool { return o <= t }}},
			{name: "full/bytes", unit: unitBytes, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricBytes},
			{name: "full/cpu", unit: unitCPUMicrosPerObject, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricCPUPerObject},
		},
	}
}

// runFull preloads fullObjects Done objects whose status is preloadAge
// old, then starts the hive, asks for a full reconciliation and measures
// until Prune has run, every object has been refreshed (an Update of it
// marked Refreshing succeeded) and every object is Done again.
//
// converge: FullReconciliationInterval Off, TriggerFullReconciliation
// right after start, RefreshInterval 1h (as statedb's) with an unlimited
// RefreshRateLimiter: its refresh walks the table in revision order from
// start and marks every object (all 2h old) Refreshing, RoundSize objects
// per write transaction. statedb: WithoutPruning plus Prune() right after
// start, WithRefreshing(1h, unlimited): its refresh loop scans the table at
// start and marks every object (all 2h old) Refreshing, one write
// transaction per object, as it always does.
func runFull(ctx context.Context, side string, sz sizes) (measure, error) {
	tg := newTarget()
	tg.refreshGoal = int64(sz.fullObjects)
	r, err := newRig(ctx, side, rigOptions{target: tg, full: true, preload: sz.fullObjects})
	if err != nil {
		return nil, err
	}
	runtime.GC()
	alloc0, cpu0, t0 := bench.TotalAlloc(), cpuTime(), time.Now()
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	err = waitClosed(ctx, tg.pruneDone, "Prune")
	if err == nil {
		err = waitClosed(ctx, tg.refreshed, "refresh of every object")
	}
	if err == nil {
		err = r.waitAllDone(ctx)
	}
	d, cpu, alloc := time.Since(t0), cpuTime()-cpu0, bench.TotalAlloc()-alloc0
	if err == nil && tg.pruned.Load() != int64(sz.fullObjects) {
		err = fmt.Errorf("Prune saw %d objects, want %d", tg.pruned.Load(), sz.fullObjects)
	}
	return stopped(r, measure{
		metricSeconds:      d.Seconds(),
		metricBytes:        float64(alloc),
		metricCPUPerObject: perObject(cpu, sz.fullObjects),
		metricUpdates:      float64(tg.updates.Load()),
	}, err)
}

// waitClosed waits until ch is closed, or fails naming what it waited for
// when ctx ends first.
func waitClosed(ctx context.Context, ch <-chan struct{}, what string) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	}
}

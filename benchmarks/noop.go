package main

import (
	"cmp"
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/benchmarks/internal/bench"
	"github.com/converge-go/converge/reconciler"
)

// noopWorkload is noop-1m: the throughput, CPU and bytes of reconciling a
// bulk load when the target costs nothing, so that what is measured is the
// reconciler and the table. Besides the two sides it runs references with
// no reconciler: the table's limit, and the bare inserts of each side, whose
// bytes noop-1m/reconciler-bytes subtracts.
func noopWorkload(sz sizes) workload {
	run := func(side string, opts rigOptions) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runNoop(ctx, side, opts, sz) }
	}
	bare := rigOptions{bare: true, last: uint64(sz.noopObjects - 1)}
	insertsOnly := func(side string) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runInsertsOnly(ctx, side, sz) }
	}
	return workload{
		name: "noop-1m",
		variants: []variant{
			{name: "converge", side: sideConverge, run: run(sideConverge, rigOptions{})},
			{name: "statedb", side: sideStatedb, run: run(sideStatedb, rigOptions{})},
			{name: "limit", side: sideLimit, run: func(ctx context.Context) (measure, error) { return runLimit(ctx, rigOptions{}, sz) }},
			{name: "limit-serial", side: sideLimit, run: func(ctx context.Context) (measure, error) { return runSerialLimit(ctx, sz) }},
			{name: "converge-prometheus", side: sideConverge, run: run(sideConverge, rigOptions{prometheus: true})},
			{name: "converge-bare", side: sideConverge, run: run(sideConverge, bare)},
			{name: "statedb-bare", side: sideStatedb, run: run(sideStatedb, bare)},
			{name: "limit-bare", side: sideLimit, run: func(ctx context.Context) (measure, error) { return runLimit(ctx, bare, sz) }},
			{name: "inserts-converge", side: sideLimit, run: insertsOnly(sideConverge)},
			{name: "inserts-statedb", side: sideLimit, run: insertsOnly(sideStatedb)},
		},
		rows: []rowSpec{
			{name: "noop-1m", unit: unitObjectsPerSec, ours: "converge", theirs: "statedb", metric: metricThroughput,
				goal: &goal{desc: ">=1.10x statedb", met: func(o, t float64) bool { return o >= 1.1*t }}},
			{name: "noop-1m/bytes", unit: unitBytes, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricBytes,
				goal: &goal{desc: "<=0.90x statedb or the table floor", met: func(o, t float64) bool { return o <= 0.9*t },
					floor: func(med func(string, string) float64) float64 { return med("limit", metricBytes) }}},
			{name: "noop-1m/reconciler-bytes", unit: unitBytes, lowerBetter: true, derive: reconcilerBytes,
				goal: &goal{desc: "<=0.90x statedb or the table floor", met: func(o, t float64) bool { return o <= 0.9*t },
					floor: func(med func(string, string) float64) float64 {
						return med("limit", metricBytes) - med("inserts-converge", metricBytes)
					}}},
			{name: "noop-1m/table-limit", unit: unitObjectsPerSec, ours: "converge", theirs: "limit", metric: metricThroughput,
				reference: "table limit",
				goal:      &goal{desc: ">=0.95x limit", met: func(o, t float64) bool { return o >= 0.95*t }}},
			{name: "noop-1m/serial-limit", unit: unitObjectsPerSec, ours: "converge", theirs: "limit-serial", metric: metricThroughput,
				reference: "serial table limit"},
			{name: "noop-1m/cpu", unit: unitCPUMicrosPerObject, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricCPUPerObject},
			{name: "noop-1m/table-limit-bytes", unit: unitBytes, lowerBetter: true, ours: "converge", theirs: "limit", metric: metricBytes,
				reference: "table limit"},
			{name: "noop-1m/bare", unit: unitObjectsPerSec, ours: "converge-bare", theirs: "statedb-bare", metric: metricThroughput,
				goal: &goal{desc: ">=1.10x statedb", met: func(o, t float64) bool { return o >= 1.1*t }}},
			{name: "noop-1m/bare-table-limit", unit: unitObjectsPerSec, ours: "converge-bare", theirs: "limit-bare", metric: metricThroughput,
				reference: "table limit",
				goal:      &goal{desc: ">=0.97x limit", met: func(o, t float64) bool { return o >= 0.97*t }}},
			{name: "noop-1m/bare-cpu", unit: unitCPUMicrosPerObject, lowerBetter: true, ours: "converge-bare", theirs: "statedb-bare", metric: metricCPUPerObject},
			{name: "noop-1m/prometheus", unit: unitObjectsPerSec, ours: "converge-prometheus", theirs: "converge", metric: metricThroughput,
				reference: "no-op metrics",
				goal:      &goal{desc: ">=0.95x no-op metrics", met: func(o, t float64) bool { return o >= 0.95*t }}},
		},
	}
}

// runNoop inserts noopObjects Pending objects in transactions of
// insertBatch and waits until every one is Done. Update does nothing. With
// opts.prometheus, converge reports to Prometheus metrics (the cost of
// metrics); opts.bare is statedb's own benchmark's shape.
func runNoop(ctx context.Context, side string, opts rigOptions, sz sizes) (measure, error) {
	tg := newTarget()
	opts.target = tg
	r, err := startRig(ctx, side, opts)
	if err != nil {
		return nil, err
	}
	runtime.GC()
	alloc0, cpu0, t0 := bench.TotalAlloc(), cpuTime(), time.Now()
	insertAll(r, sz.noopObjects, sz.insertBatch)
	err = r.waitAllDone(ctx)
	d, cpu, alloc := time.Since(t0), cpuTime()-cpu0, bench.TotalAlloc()-alloc0
	if err == nil && tg.updates.Load() < int64(sz.noopObjects) {
		err = fmt.Errorf("%d Updates for %d objects", tg.updates.Load(), sz.noopObjects)
	}
	return stopped(r, measure{
		metricThroughput:   float64(sz.noopObjects) / d.Seconds(),
		metricBytes:        float64(alloc),
		metricCPUPerObject: perObject(cpu, sz.noopObjects),
		metricSeconds:      d.Seconds(),
		metricUpdates:      float64(tg.updates.Load()),
	}, err)
}

// reconcilerBytes derives noop-1m/reconciler-bytes: each side's bytes less
// what its own inserts allocate with no reconciler at all. Each side is
// given its own object type's inserts because the types differ in size
// (converge's Status.Error is a string, statedb's a pointer): subtracting
// one side's inserts from both would charge the difference to a reconciler.
func reconcilerBytes(med func(name, metric string) float64) (ours, theirs float64) {
	return med("converge", metricBytes) - med("inserts-converge", metricBytes),
		med("statedb", metricBytes) - med("inserts-statedb", metricBytes)
}

// runInsertsOnly performs exactly noop-1m's inserts into side's table with
// no reconciler: nothing reads the changes and nothing writes a status. It
// measures the bytes and time the inserts cost on their own.
func runInsertsOnly(ctx context.Context, side string, sz sizes) (measure, error) {
	r, err := startRig(ctx, side, rigOptions{})
	if err != nil {
		return nil, err
	}
	runtime.GC()
	alloc0, cpu0, t0 := bench.TotalAlloc(), cpuTime(), time.Now()
	insertAll(r, sz.noopObjects, sz.insertBatch)
	d, cpu, alloc := time.Since(t0), cpuTime()-cpu0, bench.TotalAlloc()-alloc0
	return stopped(r, measure{
		metricThroughput:   float64(sz.noopObjects) / d.Seconds(),
		metricBytes:        float64(alloc),
		metricCPUPerObject: perObject(cpu, sz.noopObjects),
		metricSeconds:      d.Seconds(),
	}, nil)
}

// runLimit measures the table's own limit for noop-1m: the same inserts,
// then one compare-and-swap per object writing its Done status, in one
// write transaction per insert batch, with no reconciler. The status
// writes run in a goroutine of their own, pipelined with the inserts as a
// reconciler's would be, and get the objects and revisions handed over
// directly instead of reading them back from the table.
func runLimit(ctx context.Context, opts rigOptions, sz sizes) (measure, error) {
	r, err := newConvergeRig(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	type written struct {
		obj *convergeObject
		rev statedb.Revision
	}
	n := sz.noopObjects
	batches := make(chan []written, n/sz.insertBatch+1)
	done := make(chan error, 1)

	runtime.GC()
	alloc0, cpu0, t0 := bench.TotalAlloc(), cpuTime(), time.Now()
	go func() {
		var err error
		for b := range batches {
			wtxn := r.db.WriteTxn(r.table)
			for _, w := range b {
				obj := w.obj.clone()
				obj.Status = reconciler.StatusDone()
				if _, _, cerr := r.table.CompareAndSwap(wtxn, w.rev, obj); cerr != nil && err == nil {
					err = cerr
				}
			}
			wtxn.Commit()
		}
		done <- err
	}()
	for from := 0; from < n; from += sz.insertBatch {
		b := make([]written, 0, sz.insertBatch)
		wtxn := r.db.WriteTxn(r.table)
		for id := from; id < min(from+sz.insertBatch, n); id++ {
			obj := r.pending(uint64(id))
			r.table.Insert(wtxn, obj)
			b = append(b, written{obj, r.table.Revision(wtxn)})
		}
		wtxn.Commit()
		batches <- b
	}
	close(batches)
	select {
	case err = <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	d, cpu, alloc := time.Since(t0), cpuTime()-cpu0, bench.TotalAlloc()-alloc0
	return stopped(r, measure{
		metricThroughput:   float64(n) / d.Seconds(),
		metricBytes:        float64(alloc),
		metricCPUPerObject: perObject(cpu, n),
		metricSeconds:      d.Seconds(),
	}, err)
}

// runSerialLimit is the table's limit with no hand-off at all: each insert
// batch, then its status writes (one compare-and-swap per object, in one
// write transaction), one after the other in one goroutine. A reconciler
// reads the changes back, runs Update on a worker and writes the statuses
// beside the inserts; its fraction of this limit is what all of that
// costs.
func runSerialLimit(ctx context.Context, sz sizes) (measure, error) {
	r, err := newConvergeRig(ctx, rigOptions{})
	if err != nil {
		return nil, err
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	n := sz.noopObjects
	objs := make([]*convergeObject, 0, sz.insertBatch)
	revs := make([]statedb.Revision, 0, sz.insertBatch)
	runtime.GC()
	alloc0, cpu0, t0 := bench.TotalAlloc(), cpuTime(), time.Now()
	for from := 0; from < n && err == nil; from += sz.insertBatch {
		objs, revs = objs[:0], revs[:0]
		wtxn := r.db.WriteTxn(r.table)
		for id := from; id < min(from+sz.insertBatch, n); id++ {
			obj := r.pending(uint64(id))
			r.table.Insert(wtxn, obj)
			objs, revs = append(objs, obj), append(revs, r.table.Revision(wtxn))
		}
		wtxn.Commit()
		wtxn = r.db.WriteTxn(r.table)
		for i, obj := range objs {
			done := obj.clone()
			done.Status = reconciler.StatusDone()
			if _, _, cerr := r.table.CompareAndSwap(wtxn, revs[i], done); cerr != nil {
				err = cerr
			}
		}
		wtxn.Commit()
		err = cmp.Or(err, ctx.Err())
	}
	d, cpu, alloc := time.Since(t0), cpuTime()-cpu0, bench.TotalAlloc()-alloc0
	return stopped(r, measure{
		metricThroughput:   float64(n) / d.Seconds(),
		metricBytes:        float64(alloc),
		metricCPUPerObject: perObject(cpu, n),
		metricSeconds:      d.Seconds(),
	}, err)
}

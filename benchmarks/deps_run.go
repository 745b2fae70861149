package main

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"

	sdbindex "github.com/cilium/statedb/index"

	"github.com/converge-go/converge/benchmarks/internal/bench"
)

// runDepsRelease measures releaseSamples releases, one at a time: a
// dependent (odd ID) and its dependency (the even ID before it) inserted
// in one transaction, the dependent first, so that it is read first and
// Blocked; then the dependency is updated and its Done releases the
// dependent. A sample is the dependent's Update start less its
// dependency's Update return: the Done's commit and the release.
func runDepsRelease(ctx context.Context, sz sizes) (measure, error) {
	n := sz.deps.releaseSamples
	tg := newDepsTarget()
	tg.stamp(2 * n)
	parent := func(id uint64) (uint64, bool) { return id - 1, id%2 == 1 }
	r, err := newDepsRig(ctx, tg, 1, dependsOnParent(parent))
	if err != nil {
		return nil, err
	}
	samples := make([]float64, 0, n)
	for i := range n {
		dep, dependent := uint64(2*i), uint64(2*i+1)
		insertIDs(r, []uint64{dependent, dep}, 2)
		if err = r.waitObjectDone(ctx, int(dependent), 0); err != nil {
			break
		}
		start, returned := tg.started[dependent].Load(), tg.returned[dep].Load()
		if returned == 0 || start < returned {
			err = fmt.Errorf("object %d's Update started before its dependency %d's returned", dependent, dep)
			break
		}
		samples = append(samples, float64(start-returned)/float64(time.Millisecond))
	}
	if err == nil && tg.updates.Load() != int64(2*n) {
		err = fmt.Errorf("%d Updates for %d objects", tg.updates.Load(), 2*n)
	}
	return stopped(r, latencyMeasure(samples), err)
}

// forestMode is how a forest run has its objects wait for their parents.
type forestMode int

const (
	forestDeps    forestMode = iota // Config.DependsOn
	forestNone                      // no dependencies at all
	forestRetry                     // Update returns RetryAfter(100ms, nil) while the parent is not Done
	forestStatedb                   // statedb's reconciler, Update failing while the parent is not Done
)

// runDepsForest inserts the forest in a fixed shuffled order, an insert
// batch per transaction, and measures the time until every object is
// Done.
func runDepsForest(ctx context.Context, sz sizes, delay time.Duration, mode forestMode) (measure, error) {
	n := sz.deps.forestObjects
	parent := forestParent(n, sz.deps.forestRoots, depsForestDepth)
	ids := shuffled(n)
	retries := new(atomic.Int64)
	var r interface {
		waitAllDone(context.Context) error
		stop() error
	}
	var insert func()
	switch mode {
	case forestStatedb:
		sr, err := newStatedbDepsRig(ctx, statedbDepsOps{delay: delay, parent: parent, retries: retries})
		if err != nil {
			return nil, err
		}
		r, insert = sr, func() { insertIDs(sr, ids, sz.insertBatch) }
	default:
		tg := newDepsTarget()
		tg.delay = delay
		dependsOn := dependsOnParent(parent)
		switch mode {
		case forestNone:
			dependsOn = nil
		case forestRetry:
			dependsOn, tg.retryParent = nil, parent
		}
		cr, err := newDepsRig(ctx, tg, depsForestConcurrency, dependsOn)
		if err != nil {
			return nil, err
		}
		r, insert = cr, func() { insertIDs(cr, ids, sz.insertBatch) }
		retries = &tg.retries
	}
	runtime.GC()
	cpu0, t0 := cpuTime(), time.Now()
	insert()
	err := r.waitAllDone(ctx)
	d, cpu := time.Since(t0), cpuTime()-cpu0
	m := measure{metricDoneSeconds: d.Seconds(), metricThroughput: float64(n) / d.Seconds(), metricCPUPerObject: perObject(cpu, n)}
	if serr := r.stop(); serr != nil && err == nil {
		err = fmt.Errorf("stopping the hive: %w", serr)
	}
	m[metricRetries] = float64(retries.Load())
	return m, err
}

// edgeMode is whom an object of deps/one-edge depends on.
type edgeMode int

const (
	edgeNone edgeMode = iota // no DependsOn
	edgePrev                 // the object one insert batch before: often not Done yet, so Blocked and released
	edgeDone                 // an object of the first batch, Done before the clock starts: never Blocked
)

// runDepsEdges is noop-1m's load of edgeObjects objects: the first insert
// batch is inserted and Done before the clock starts, then every later
// object is inserted and, by mode, depends on one other. Besides the
// time and CPU, it measures the live heap once every object is Done: what
// the reconciler keeps for the edges.
func runDepsEdges(ctx context.Context, sz sizes, mode edgeMode) (measure, error) {
	n, batch := sz.deps.edgeObjects, sz.insertBatch
	tg := newDepsTarget()
	parent := map[edgeMode]parentFunc{
		edgePrev: func(id uint64) (uint64, bool) { return id - uint64(batch), id >= uint64(batch) },
		edgeDone: func(id uint64) (uint64, bool) { return id % uint64(batch), id >= uint64(batch) },
	}[mode]
	var dependsOn func(*convergeObject) []sdbindex.Key
	if parent != nil {
		dependsOn = dependsOnParent(parent)
	}
	r, err := newDepsRig(ctx, tg, 1, dependsOn)
	if err != nil {
		return nil, err
	}
	insertRange(r, 0, min(batch, n), batch)
	if err := r.waitAllDone(ctx); err != nil {
		return stopped(r, nil, err)
	}
	timed := n - min(batch, n)
	runtime.GC()
	alloc0, cpu0, t0 := bench.TotalAlloc(), cpuTime(), time.Now()
	insertRange(r, min(batch, n), n, batch)
	err = r.waitAllDone(ctx)
	d, cpu, alloc := time.Since(t0), cpuTime()-cpu0, bench.TotalAlloc()-alloc0
	if err == nil && tg.updates.Load() != int64(n) {
		err = fmt.Errorf("%d Updates for %d objects", tg.updates.Load(), n)
	}
	return stopped(r, measure{
		metricThroughput:   float64(timed) / d.Seconds(),
		metricCPUPerObject: perObject(cpu, max(timed, 1)),
		metricBytes:        float64(alloc),
		metricLiveBytes:    float64(liveHeap()),
	}, err)
}

// liveHeap is the bytes of heap objects reachable after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// runDepsChain inserts a chain of n objects, each depending on the one
// before (withDeps), in order, and waits until every one is Done; then
// deletes them all, in order, and waits until the target has deleted every
// one: leaves first, so the Deletes run in reverse.
func runDepsChain(ctx context.Context, sz sizes, n int, withDeps bool) (measure, error) {
	tg := newDepsTarget()
	tg.deleteGoal = int64(n)
	dependsOn := dependsOnParent(func(id uint64) (uint64, bool) { return id - 1, id > 0 })
	if !withDeps {
		dependsOn = nil
	}
	r, err := newDepsRig(ctx, tg, 1, dependsOn)
	if err != nil {
		return nil, err
	}
	runtime.GC()
	t0 := time.Now()
	insertAll(r, n, sz.insertBatch)
	err = r.waitAllDone(ctx)
	done := time.Since(t0)
	var deleted time.Duration
	if err == nil {
		t1 := time.Now()
		deleteRange(r, n, sz.insertBatch)
		select {
		case <-tg.deleted:
		case <-ctx.Done():
			err = fmt.Errorf("%d of %d Deletes: %w", tg.deletes.Load(), n, ctx.Err())
		}
		deleted = time.Since(t1)
	}
	return stopped(r, measure{
		metricDoneSeconds:     done.Seconds(),
		metricDeleteSeconds:   deleted.Seconds(),
		metricDonePerObject:   perObject(done, n),
		metricDeletePerObject: perObject(deleted, n),
	}, err)
}

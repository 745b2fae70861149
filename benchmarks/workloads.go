package main

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// sizes are the knobs of the workloads; flags set them.
type sizes struct {
	noopObjects    int           // noop-1m: objects inserted
	insertBatch    int           // objects per insert transaction, everywhere
	slowObjects    int           // slow-1ms: objects inserted
	slowDelay      time.Duration // slow-1ms: how long each Update sleeps
	latencySmall   int           // latency: Done objects in the small table
	latencyLarge   int           // latency: Done objects in the large table
	latencySamples int           // latency: single-object changes per run
	latencyGap     time.Duration // latency: pause before each change
	retryObjects   int           // retry-storm: objects inserted
	retryHeal      time.Duration // retry-storm: how long the target fails
	fullObjects    int           // full: objects in the table
	runTimeout     time.Duration // the most one run may take
}

// fullSizes are the sizes of the workloads.
func fullSizes() sizes {
	return sizes{
		noopObjects:    1_000_000,
		insertBatch:    1000,
		slowObjects:    5000,
		slowDelay:      time.Millisecond,
		latencySmall:   1000,
		latencyLarge:   1_000_000,
		latencySamples: 1000,
		latencyGap:     5 * time.Second / roundRate,
		retryObjects:   100_000,
		retryHeal:      2 * time.Second,
		fullObjects:    1_000_000,
		runTimeout:     5 * time.Minute,
	}
}

// quickSizes shrink every workload so that a whole run takes well under
// 30 seconds.
func quickSizes() sizes {
	return sizes{
		noopObjects:    100_000,
		insertBatch:    1000,
		slowObjects:    300,
		slowDelay:      time.Millisecond,
		latencySmall:   1000,
		latencyLarge:   50_000,
		latencySamples: 100,
		latencyGap:     5 * time.Second / roundRate,
		retryObjects:   5000,
		retryHeal:      300 * time.Millisecond,
		fullObjects:    50_000,
		runTimeout:     time.Minute,
	}
}

// measure is what one run of one variant measured, by metric name.
type measure map[string]float64

// variant is one of the things a workload compares: a reconciler in one
// configuration, or a reference. Its run builds a fresh hive, measures and
// stops the hive.
type variant struct {
	name string // unique within the workload: "converge", "statedb-1k", ...
	side string // sideConverge, sideStatedb or sideLimit, for -side
	run  func(ctx context.Context) (measure, error)
}

const (
	sideConverge = "converge"
	sideStatedb  = "statedb"
	sideLimit    = "limit" // the table's own limit, no reconciler
)

// rowSpec says how one row of the table is computed from the medians of
// the runs: "ours" is converge, "theirs" is statedb unless reference says
// what else it is.
type rowSpec struct {
	name        string
	unit        string
	lowerBetter bool
	ours        string // variant whose metric is the converge column
	theirs      string // variant whose metric is the statedb column
	metric      string
	reference   string // non-empty when theirs is not statedb: what it is
	goal        *goal

	// derive, when set, computes the two columns from the medians instead
	// of ours, theirs and metric.
	derive func(med func(name, metric string) float64) (ours, theirs float64)
}

// goal is one of the team's targets for a row.
type goal struct {
	desc string
	met  func(ours, theirs float64) bool
}

// workload is one named comparison: its variants run in alternation, each
// run a fresh hive, and its rows summarize the medians.
type workload struct {
	name     string
	variants []variant
	rows     []rowSpec
}

// workloads returns every workload at the given sizes.
func workloads(sz sizes) []workload {
	return []workload{
		noopWorkload(sz),
		slowWorkload(sz),
		latencyWorkload(sz),
		retryWorkload(sz),
		fullWorkload(sz),
	}
}

// newRig builds the rig of a side.
func newRig(ctx context.Context, side string, opts rigOptions) (rig, error) {
	switch side {
	case sideConverge:
		r, err := newConvergeRig(ctx, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	case sideStatedb:
		r, err := newStatedbRig(ctx, opts)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
	return nil, fmt.Errorf("unknown side %q", side)
}

// startRig builds and starts a rig; the returned stop must be called.
func startRig(ctx context.Context, side string, opts rigOptions) (rig, error) {
	r, err := newRig(ctx, side, opts)
	if err != nil {
		return nil, err
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// insertAll inserts objects [0, n) as Pending, batch objects per write
// transaction.
func insertAll(r rig, n, batch int) {
	for from := 0; from < n; from += batch {
		r.insertPending(from, min(from+batch, n))
	}
}

// totalAlloc is the process's cumulative bytes allocated.
func totalAlloc() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.TotalAlloc
}

// stopped stops r and joins its error with err.
func stopped(r rig, m measure, err error) (measure, error) {
	if serr := r.stop(); serr != nil && err == nil {
		err = fmt.Errorf("stopping the hive: %w", serr)
	}
	return m, err
}

// --- noop-1m ----------------------------------------------------------------

func noopWorkload(sz sizes) workload {
	run := func(side string, prom bool) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runNoop(ctx, side, prom, sz) }
	}
	return workload{
		name: "noop-1m",
		variants: []variant{
			{name: "converge", side: sideConverge, run: run(sideConverge, false)},
			{name: "statedb", side: sideStatedb, run: run(sideStatedb, false)},
			{name: "limit", side: sideLimit, run: func(ctx context.Context) (measure, error) { return runLimit(ctx, sz) }},
			{name: "converge-prometheus", side: sideConverge, run: run(sideConverge, true)},
		},
		rows: []rowSpec{
			{name: "noop-1m", unit: unitObjectsPerSec, ours: "converge", theirs: "statedb", metric: metricThroughput,
				goal: &goal{desc: ">=1.10x statedb", met: func(o, t float64) bool { return o >= 1.1*t }}},
			{name: "noop-1m/bytes", unit: unitBytes, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricBytes,
				goal: &goal{desc: "<=0.90x statedb", met: func(o, t float64) bool { return o <= 0.9*t }}},
			{name: "noop-1m/table-limit", unit: unitObjectsPerSec, ours: "converge", theirs: "limit", metric: metricThroughput,
				reference: "table limit",
				goal:      &goal{desc: ">=0.95x limit", met: func(o, t float64) bool { return o >= 0.95*t }}},
			{name: "noop-1m/cpu", unit: unitCPUMicrosPerObject, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricCPUPerObject},
			{name: "noop-1m/table-limit-bytes", unit: unitBytes, lowerBetter: true, ours: "converge", theirs: "limit", metric: metricBytes,
				reference: "table limit"},
			{name: "noop-1m/prometheus", unit: unitObjectsPerSec, ours: "converge-prometheus", theirs: "converge", metric: metricThroughput,
				reference: "no-op metrics",
				goal:      &goal{desc: ">=0.95x no-op metrics", met: func(o, t float64) bool { return o >= 0.95*t }}},
		},
	}
}

// runNoop inserts noopObjects Pending objects in transactions of
// insertBatch and waits until every one is Done. Update does nothing. With
// prom, converge reports to Prometheus metrics (the cost of metrics).
func runNoop(ctx context.Context, side string, prom bool, sz sizes) (measure, error) {
	tg := newTarget()
	r, err := startRig(ctx, side, rigOptions{target: tg, prometheus: prom})
	if err != nil {
		return nil, err
	}
	runtime.GC()
	alloc0, cpu0, t0 := totalAlloc(), cpuTime(), time.Now()
	insertAll(r, sz.noopObjects, sz.insertBatch)
	err = r.waitAllDone(ctx)
	d, cpu, alloc := time.Since(t0), cpuTime()-cpu0, totalAlloc()-alloc0
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

// runLimit measures the table's own limit for noop-1m: the same inserts,
// then one compare-and-swap per object writing its Done status, in one
// write transaction per insert batch, with no reconciler. The status
// writes run in a goroutine of their own, pipelined with the inserts as a
// reconciler's would be, and get the objects and revisions handed over
// directly instead of reading them back from the table.
func runLimit(ctx context.Context, sz sizes) (measure, error) {
	r, err := newConvergeRig(ctx, rigOptions{})
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
	alloc0, cpu0, t0 := totalAlloc(), cpuTime(), time.Now()
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
	d, cpu, alloc := time.Since(t0), cpuTime()-cpu0, totalAlloc()-alloc0
	return stopped(r, measure{
		metricThroughput:   float64(n) / d.Seconds(),
		metricBytes:        float64(alloc),
		metricCPUPerObject: perObject(cpu, n),
		metricSeconds:      d.Seconds(),
	}, err)
}

// --- slow-1ms ---------------------------------------------------------------

// slowConcurrency are converge's Concurrency settings in slow-1ms.
var slowConcurrency = []int{1, 16, 64}

func slowWorkload(sz sizes) workload {
	run := func(side string, concurrency int) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runSlow(ctx, side, concurrency, sz) }
	}
	w := workload{name: "slow-1ms"}
	for i, c := range slowConcurrency {
		name := fmt.Sprintf("converge-c%d", c)
		w.variants = append(w.variants, variant{name: name, side: sideConverge, run: run(sideConverge, c)})
		if i == 0 {
			// statedb is sequential: one variant is compared to all.
			w.variants = append(w.variants, variant{name: "statedb", side: sideStatedb, run: run(sideStatedb, 1)})
		}
		row := rowSpec{name: fmt.Sprintf("slow-1ms/c%d", c), unit: unitObjectsPerSec, ours: name, theirs: "statedb", metric: metricThroughput}
		if c == 64 {
			row.goal = &goal{desc: ">=30x statedb", met: func(o, t float64) bool { return o >= 30*t }}
		}
		w.rows = append(w.rows, row)
	}
	return w
}

// runSlow inserts slowObjects Pending objects, each of whose Updates sleeps
// slowDelay, and waits until every one is Done.
func runSlow(ctx context.Context, side string, concurrency int, sz sizes) (measure, error) {
	tg := newTarget()
	tg.delay = sz.slowDelay
	r, err := startRig(ctx, side, rigOptions{target: tg, concurrency: concurrency})
	if err != nil {
		return nil, err
	}
	runtime.GC()
	t0 := time.Now()
	insertAll(r, sz.slowObjects, sz.insertBatch)
	err = r.waitAllDone(ctx)
	d := time.Since(t0)
	return stopped(r, measure{
		metricThroughput: float64(sz.slowObjects) / d.Seconds(),
		metricSeconds:    d.Seconds(),
		metricUpdates:    float64(tg.updates.Load()),
	}, err)
}

// --- latency ----------------------------------------------------------------

func latencyWorkload(sz sizes) workload {
	run := func(side string, n int) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runLatency(ctx, side, n, sz) }
	}
	small, large := countLabel(sz.latencySmall), countLabel(sz.latencyLarge)
	w := workload{name: "latency"}
	tableSizes := []int{sz.latencySmall, sz.latencyLarge}
	if small == large {
		tableSizes = tableSizes[:1]
	}
	for _, n := range tableSizes {
		l := countLabel(n)
		w.variants = append(w.variants,
			variant{name: "converge-" + l, side: sideConverge, run: run(sideConverge, n)},
			variant{name: "statedb-" + l, side: sideStatedb, run: run(sideStatedb, n)})
		for _, p := range []string{metricP50, metricP99} {
			row := rowSpec{name: "latency/" + l + "/" + p, unit: unitMillis, lowerBetter: true,
				ours: "converge-" + l, theirs: "statedb-" + l, metric: p}
			if p == metricP99 {
				row.goal = &goal{desc: "<=statedb", met: func(o, t float64) bool { return o <= t }}
			}
			w.rows = append(w.rows, row)
		}
	}
	if small == large {
		return w
	}
	w.rows = append(w.rows, rowSpec{
		name: "latency/p99-" + large + "-vs-" + small, unit: unitTimes, lowerBetter: true,
		derive: func(med func(name, metric string) float64) (float64, float64) {
			return med("converge-"+large, metricP99) / med("converge-"+small, metricP99),
				med("statedb-"+large, metricP99) / med("statedb-"+small, metricP99)
		},
		goal: &goal{desc: "converge <=1.5x", met: func(o, _ float64) bool { return o <= 1.5 }},
	})
	return w
}

// runLatency fills a table with n Done objects, then changes one object
// at a time (a new value and a Pending status) and measures the time from
// just before the change's commit until the waiter sees the object Done.
// Changes are latencyGap apart (by default five times the round limiter's
// interval), so each finds the reconciler idle and its
// round limiter with a token: this measures the latency of one change, not
// the limiter's pacing.
func runLatency(ctx context.Context, side string, n int, sz sizes) (measure, error) {
	tg := newTarget()
	r, err := startRig(ctx, side, rigOptions{target: tg})
	if err != nil {
		return nil, err
	}
	insertAll(r, n, sz.insertBatch)
	if err := r.waitAllDone(ctx); err != nil {
		return stopped(r, nil, err)
	}
	// Collect the fill's garbage now rather than during the samples.
	runtime.GC()
	rnd := rand.New(rand.NewPCG(uint64(n), 6))
	lat := make([]float64, 0, sz.latencySamples)
	alloc0 := totalAlloc()
	for range sz.latencySamples {
		time.Sleep(sz.latencyGap)
		id := rnd.IntN(n)
		rev, t0 := r.touch(id)
		if err := r.waitObjectDone(ctx, id, rev); err != nil {
			return stopped(r, nil, err)
		}
		lat = append(lat, float64(time.Since(t0))/float64(time.Millisecond))
	}
	allocPerChange := float64(totalAlloc()-alloc0) / float64(sz.latencySamples)
	slices.Sort(lat)
	return stopped(r, measure{
		metricP50:      percentile(lat, 50),
		metricP99:      percentile(lat, 99),
		"max":          lat[len(lat)-1],
		"bytes/change": allocPerChange,
	}, nil)
}

// --- retry-storm ------------------------------------------------------------

func retryWorkload(sz sizes) workload {
	run := func(side string) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runRetry(ctx, side, sz) }
	}
	return workload{
		name: "retry-storm",
		variants: []variant{
			{name: "converge", side: sideConverge, run: run(sideConverge)},
			{name: "statedb", side: sideStatedb, run: run(sideStatedb)},
		},
		rows: []rowSpec{
			{name: "retry-storm/cpu", unit: unitCPUPerSec, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricCPURate,
				goal: &goal{desc: "converge <=0.1", met: func(o, _ float64) bool { return o <= 0.1 }}},
			{name: "retry-storm/cpu-with-first-pass", unit: unitCPUPerSec, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricCPURateTotal},
			{name: "retry-storm/first-pass", unit: unitSeconds, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricFirstPass},
			{name: "retry-storm/heal-to-done", unit: unitSeconds, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricHealToDone},
		},
	}
}

// runRetry inserts retryObjects Pending objects into a target that fails
// every Update, lets it fail for retryHeal after the last insert, heals it
// and measures the time until every object is Done. Meanwhile it measures
// the process CPU time burnt, over the whole window and over the part of
// it after every object has failed once: the cost of waiting for the
// target, without the first attempts every reconciler must make.
func runRetry(ctx context.Context, side string, sz sizes) (measure, error) {
	tg := newTarget()
	tg.failing.Store(true)
	r, err := startRig(ctx, side, rigOptions{target: tg})
	if err != nil {
		return nil, err
	}
	runtime.GC()
	insertAll(r, sz.retryObjects, sz.insertBatch)
	cpu0, t0 := cpuTime(), time.Now()
	healAt := t0.Add(sz.retryHeal)

	wctx, cancel := context.WithDeadline(ctx, healAt)
	err = r.waitNonePending(wctx)
	cancel()
	cpu1, t1 := cpuTime(), time.Now()
	firstPass := err == nil
	if ctx.Err() != nil {
		return stopped(r, nil, ctx.Err())
	}
	time.Sleep(time.Until(healAt))
	cpu2, t2 := cpuTime(), time.Now()
	failedUpdates := tg.updates.Load()

	tg.failing.Store(false)
	err = r.waitAllDone(ctx)
	healed := time.Since(t2)

	m := measure{
		metricCPURate:      math.NaN(),
		metricCPURateTotal: (cpu2 - cpu0).Seconds() / t2.Sub(t0).Seconds(),
		metricFirstPass:    math.NaN(),
		metricHealToDone:   healed.Seconds(),
		metricFailed:       float64(failedUpdates),
	}
	if firstPass && t2.Sub(t1) > sz.retryHeal/10 {
		m[metricCPURate] = (cpu2 - cpu1).Seconds() / t2.Sub(t1).Seconds()
		m[metricFirstPass] = t1.Sub(t0).Seconds()
	}
	return stopped(r, m, err)
}

// --- full -------------------------------------------------------------------

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
// right after start, RefreshInterval 1ns with an unlimited
// RefreshRateLimiter. statedb: WithoutPruning plus Prune() right after
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
	alloc0, cpu0, t0 := totalAlloc(), cpuTime(), time.Now()
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
	d, cpu, alloc := time.Since(t0), cpuTime()-cpu0, totalAlloc()-alloc0
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

func waitClosed(ctx context.Context, ch <-chan struct{}, what string) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
	}
}

// perObject is d in microseconds per object.
func perObject(d time.Duration, n int) float64 {
	return float64(d) / float64(time.Microsecond) / float64(n)
}

// countLabel names a size: 1000 -> "1k", 1000000 -> "1m".
func countLabel(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dm", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

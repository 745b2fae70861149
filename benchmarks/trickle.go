package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"github.com/cilium/statedb"
)

// tricklePool is how many distinct objects a trickle changes in turn (all
// of them when the table is smaller). A change takes the object whose
// last change is the oldest, so two changes in flight never hit one
// object unless tricklePool changes are in flight at once.
const tricklePool = 1000

// bulkTrickleRate is the rate, in changes per second, of the trickle that
// runs during a bulk load: issue 13's 500/s.
const bulkTrickleRate = 500

// trickleWorkload is latency/trickle-<rate>: a steady open-loop trickle
// of single-object changes at rate per second, at both table sizes.
func trickleWorkload(sz sizes, rate int) workload {
	return tableSizesWorkload(fmt.Sprintf("latency/trickle-%d", rate), sz, func(ctx context.Context, side string, n int) (measure, error) {
		return runTrickle(ctx, side, n, rate, sz)
	})
}

// runTrickle fills a table with n Done objects, then writes
// trickleSamples single-object changes at rate per second, open loop, and
// measures each change's latency (see trickle).
func runTrickle(ctx context.Context, side string, n, rate int, sz sizes) (measure, error) {
	ids := distinctIDs(rand.New(rand.NewPCG(uint64(n), uint64(rate))), n, min(n, tricklePool))
	r, err := startFilled(ctx, side, n, sz.insertBatch)
	if err != nil {
		return nil, err
	}
	tr := newTrickle(r, rate, ids)
	alloc0 := totalAlloc()
	err = tr.run(ctx, sz.trickleSamples, nil)
	m := tr.measure()
	m["bytes/change"] = float64(totalAlloc()-alloc0) / float64(sz.trickleSamples)
	return stopped(r, m, err)
}

// bulkTrickleWorkload is latency/bulk+trickle: a trickle of single-object
// changes to existing objects while a bulk load of new objects goes on.
func bulkTrickleWorkload(sz sizes) workload {
	run := func(side string) func(ctx context.Context) (measure, error) {
		return func(ctx context.Context) (measure, error) { return runBulkTrickle(ctx, side, sz) }
	}
	const name = "latency/bulk+trickle"
	return workload{
		name: name,
		variants: []variant{
			{name: "converge", side: sideConverge, run: run(sideConverge)},
			{name: "statedb", side: sideStatedb, run: run(sideStatedb)},
		},
		// The rows beyond the goals': the latency counted from when each
		// change was due, which adds the wait for the write lock that the
		// load and the status writes hold; and the load's duration, which
		// shows that neither side buys the trickle's latency with a slower
		// load.
		rows: append(latencyRows(name, "converge", "statedb"),
			rowSpec{name: name + "/from-due/p50", unit: unitMillis, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricFromDueP50},
			rowSpec{name: name + "/from-due/p99", unit: unitMillis, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricFromDueP99},
			rowSpec{name: name + "/load", unit: unitSeconds, lowerBetter: true, ours: "converge", theirs: "statedb", metric: metricSeconds}),
	}
}

// runBulkTrickle fills a table with latencySmall Done objects, then
// bulkLoads times: inserts bulkObjects new Pending objects in transactions
// of insertBatch as fast as it can while a trickle of bulkTrickleRate
// changes per second runs on the existing objects, until the last new
// object is Done. It measures the trickle's latencies over every load, and
// the mean time from a load's first insert until its last object is Done.
// Several loads per run give enough trickle changes for a p99: one load
// lasts well under a second.
func runBulkTrickle(ctx context.Context, side string, sz sizes) (measure, error) {
	base := sz.latencySmall
	ids := distinctIDs(rand.New(rand.NewPCG(uint64(base), bulkTrickleRate)), base, base)
	r, err := startFilled(ctx, side, base, sz.insertBatch)
	if err != nil {
		return nil, err
	}
	tr := newTrickle(r, bulkTrickleRate, ids)
	var loading time.Duration
	for k := range sz.bulkLoads {
		from := base + k*sz.bulkObjects
		// Every load starts from a collected heap, as the first does.
		runtime.GC()
		stop := make(chan struct{})
		trickled := make(chan error, 1)
		go func() { trickled <- tr.run(ctx, 0, stop) }()
		t0 := time.Now()
		insertRange(r, from, from+sz.bulkObjects, sz.insertBatch)
		// Both reconcilers take changes in revision order, so the last
		// object inserted is the last of the load to be Done.
		err := r.waitObjectDone(ctx, from+sz.bulkObjects-1, 0)
		loading += time.Since(t0)
		close(stop)
		if terr := <-trickled; err == nil {
			err = terr
		}
		if err == nil {
			err = r.waitAllDone(ctx)
		}
		if err != nil {
			return stopped(r, nil, err)
		}
	}
	m := tr.measure()
	m[metricSeconds] = loading.Seconds() / float64(sz.bulkLoads)
	return stopped(r, m, nil)
}

// trickle writes single-object changes to a rig at a fixed rate and
// measures each one's latency: from just before its commit until an
// observer sees the object Done at the change's revision or later.
//
// It is open loop: change i is due at start + i/rate whether or not the
// earlier ones are Done, and a change written late (the writer was not
// scheduled in time) is written at once, with the later ones still due on
// the original schedule, so that the rate does not drift. Go's timers
// wake with about a millisecond's slack on Linux, so at 2000/s changes
// often go out in pairs; the average rate holds, and both sides get the
// same schedule.
//
// Each change has its own observer goroutine asleep on the object's watch
// channel (rig.waitObjectDone, the observer of latency/isolated too). It
// costs a lookup when the change commits and one when the status is
// written, and nothing for the other objects' writes. A change iterator
// would wake on every commit and read every changed object, the bulk
// load's too, taking CPU from both sides on a small machine.
type trickle struct {
	r    rig
	rate int
	free chan int // objects with no change in flight, longest idle first

	timer *time.Timer
	lag   []float64 // per change, how late it was written, in ms
	waits int       // changes that found every object in flight

	observers  sync.WaitGroup
	mu         sync.Mutex
	lat        []float64 // per change, its latency in ms
	latFromDue []float64 // per change, ms from due to Done: latency plus the waits for the writer and the write lock
	err        error     // the first observer's error
}

// newTrickle returns a trickle of rate changes per second to the objects
// ids, which are taken in turn.
func newTrickle(r rig, rate int, ids []int) *trickle {
	t := &trickle{r: r, rate: rate, free: make(chan int, len(ids)), timer: time.NewTimer(time.Hour)}
	t.timer.Stop()
	for _, id := range ids {
		t.free <- id
	}
	return t
}

// run writes changes on schedule until it has written n (no limit if n is
// 0), stop is closed or ctx ends, then waits until every change it wrote
// has been observed Done. The schedule starts when run does, and its first
// change, due then, is always written: a load can end before run's
// goroutine is first scheduled, and a run without a change has nothing to
// measure. It returns an observer's error or ctx's.
func (t *trickle) run(ctx context.Context, n int, stop <-chan struct{}) error {
	start := time.Now()
	for i := 0; n <= 0 || i < n; i++ {
		due := start.Add(time.Duration(i) * time.Second / time.Duration(t.rate))
		if i > 0 && !t.sleepUntil(ctx, stop, due) {
			break
		}
		id, ok := t.take(ctx)
		if !ok {
			break
		}
		t.lag = append(t.lag, millisSince(due))
		rev, t0 := t.r.touch(id)
		t.observers.Add(1)
		go t.observe(ctx, id, rev, due, t0)
	}
	t.observers.Wait()
	if t.err != nil {
		return t.err
	}
	return ctx.Err()
}

// sleepUntil sleeps until due, and reports whether to go on: false once
// stop is closed or ctx has ended.
func (t *trickle) sleepUntil(ctx context.Context, stop <-chan struct{}, due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		select {
		case <-stop:
			return false
		case <-ctx.Done():
			return false
		default:
			return true
		}
	}
	t.timer.Reset(d)
	defer t.timer.Stop()
	select {
	case <-t.timer.C:
		return true
	case <-stop:
		return false
	case <-ctx.Done():
		return false
	}
}

// take returns the object idle for longest, waiting for one if every
// object has a change in flight (counted in waits: the trickle is then
// closed loop, and the rate too high for the pool). It returns false if
// ctx ends first.
func (t *trickle) take(ctx context.Context) (int, bool) {
	select {
	case id := <-t.free:
		return id, true
	default:
	}
	t.waits++
	select {
	case id := <-t.free:
		return id, true
	case <-ctx.Done():
		return 0, false
	}
}

// observe waits until object id is Done at a revision after rev, the
// change's (at rev itself it is Pending), records the latency of the
// change committed at t0 and due at due, and frees the object.
func (t *trickle) observe(ctx context.Context, id int, rev statedb.Revision, due, t0 time.Time) {
	defer t.observers.Done()
	err := t.r.waitObjectDone(ctx, id, rev)
	ms, fromDue := millisSince(t0), millisSince(due)
	t.mu.Lock()
	if err != nil && t.err == nil {
		t.err = err
	}
	t.lat = append(t.lat, ms)
	t.latFromDue = append(t.latFromDue, fromDue)
	t.mu.Unlock()
	t.free <- id
}

// measure summarizes every change run has written: the latencies' p50,
// p99 and maximum; the same percentiles counted from when each change was
// due; and, for the progress log, how late the writes were and how many
// changes waited for an object.
func (t *trickle) measure() measure {
	m := latencyMeasure(t.lat)
	m["changes"] = float64(len(t.lat))
	fromDue := latencyMeasure(t.latFromDue)
	m[metricFromDueP50], m[metricFromDueP99] = fromDue[metricP50], fromDue[metricP99]
	lag := latencyMeasure(t.lag)
	m["late-p50-ms"], m["late-p99-ms"] = lag[metricP50], lag[metricP99]
	m["waits"] = float64(t.waits)
	return m
}

// distinctIDs returns k distinct objects of [0, n) in random order. It
// samples rather than permuting [0, n), which for a large table would
// allocate the whole range to use a thousand of it.
func distinctIDs(rnd *rand.Rand, n, k int) []int {
	seen := make(map[int]bool, k)
	ids := make([]int, 0, k)
	for len(ids) < k {
		if id := rnd.IntN(n); !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids
}

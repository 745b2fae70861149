package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/converge-go/converge/benchmarks/internal/bench"
	"github.com/converge-go/converge/benchmarks/internal/trickle"
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
	alloc0 := bench.TotalAlloc()
	err = tr.Run(ctx, sz.trickleSamples, nil)
	m := measure(tr.Measure())
	m["bytes/change"] = float64(bench.TotalAlloc()-alloc0) / float64(sz.trickleSamples)
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
		go func() { trickled <- tr.Run(ctx, 0, stop) }()
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
	m := measure(tr.Measure())
	m[metricSeconds] = loading.Seconds() / float64(sz.bulkLoads)
	return stopped(r, m, nil)
}

// newTrickle returns a trickle of rate changes per second to the objects
// ids of r, taken in turn (see trickle.Trickle).
func newTrickle(r rig, rate int, ids []int) *trickle.Trickle {
	return trickle.New(rigChanger{r}, rate, ids)
}

// rigChanger is a rig as the trickle package drives it.
type rigChanger struct{ r rig }

func (c rigChanger) Touch(id int) (uint64, time.Time) { return c.r.touch(id) }

func (c rigChanger) WaitDone(ctx context.Context, id int, rev uint64) error {
	return c.r.waitObjectDone(ctx, id, rev)
}

// distinctIDs returns k distinct objects of [0, n) in random order.
func distinctIDs(rnd *rand.Rand, n, k int) []int { return trickle.DistinctIDs(rnd, n, k) }

package main

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// slowConcurrency are converge's Concurrency settings in slow-1ms.
var slowConcurrency = []int{1, 16, 64, 256}

// slowWorkload is slow-1ms: an I/O-bound target, where converge's
// Concurrency is meant to pay off against statedb's one operation at a
// time.
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
		switch c {
		case 64:
			row.goal = &goal{desc: ">=30x statedb", met: func(o, t float64) bool { return o >= 30*t }}
		case 256:
			// The ideal for 1 ms operations 256 at a time is 256k/s.
			row.goal = &goal{desc: ">=150k objects/s", met: func(o, _ float64) bool { return o >= 150_000 }}
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

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

// slowObjectsAt is how many objects a slow-1ms run at concurrency
// inserts: slowObjects, or slowPerWorker per worker when that is more. At
// Concurrency 256, 5000 objects are 20 Updates per worker, and the run
// would time its ramp (the first inserts, the first round, starting the
// workers) as much as its throughput.
func slowObjectsAt(concurrency int, sz sizes) int {
	return max(sz.slowObjects, sz.slowPerWorker*concurrency)
}

// runSlow inserts slowObjectsAt Pending objects, each of whose Updates
// sleeps slowDelay, and waits until every one is Done.
func runSlow(ctx context.Context, side string, concurrency int, sz sizes) (measure, error) {
	n := slowObjectsAt(concurrency, sz)
	tg := newTarget()
	tg.delay = sz.slowDelay
	r, err := startRig(ctx, side, rigOptions{target: tg, concurrency: concurrency})
	if err != nil {
		return nil, err
	}
	runtime.GC()
	t0 := time.Now()
	insertAll(r, n, sz.insertBatch)
	err = r.waitAllDone(ctx)
	d := time.Since(t0)
	return stopped(r, measure{
		metricThroughput: float64(n) / d.Seconds(),
		metricSeconds:    d.Seconds(),
		metricUpdates:    float64(tg.updates.Load()),
	}, err)
}

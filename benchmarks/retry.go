package main

import (
	"context"
	"math"
	"runtime"
	"time"
)

// retryWorkload is retry-storm: what a reconciler costs while its target
// is down, and how fast it recovers when the target heals.
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

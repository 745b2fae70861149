package main

import (
	"context"

	"github.com/converge-go/converge/benchmarks/internal/waitorder"
)

// The waiting-order workloads (startup+changes, noisy-tenant,
// hung-target) live in benchmarks/internal/waitorder, which the nested
// module benchmarks/crqueue runs too, against controller-runtime's
// priority queue. Here they compare converge with and without its
// ordering options, and with statedb's reconciler where it applies.

// waitOrderSizes are the waiting-order workloads' sizes.
func waitOrderSizes(sz sizes) waitorder.Sizes {
	s := waitorder.FullSizes()
	s.Backlog, s.Samples, s.InsertBatch = sz.backlogObjects, sz.backlogSamples, sz.insertBatch
	s.HungObjects, s.HungWindow = sz.hungObjects, sz.hungWindow
	return s
}

// waitOrderRun adapts a waitorder workload to a variant's run.
func waitOrderRun[O any](run func(context.Context, waitorder.Factory, waitorder.Sizes, O) (map[string]float64, error),
	f waitorder.Factory, sz waitorder.Sizes, order O) func(context.Context) (measure, error) {
	return func(ctx context.Context) (measure, error) {
		m, err := run(ctx, f, sz, order)
		return measure(m), err
	}
}

// withFloor is sz with the floor measured: the changes while the backlog
// is inserted already Done (waitorder.FloorP99), for the two variants a
// workload's rows compare (not converge-fifo: a floor has no order).
func withFloor(sz waitorder.Sizes) waitorder.Sizes {
	sz.Floor = true
	return sz
}

// ratioRow is a row comparing, for ours and theirs, metric a's median
// over metric b's.
func ratioRow(name, ours, theirs, a, b string, lowerBetter bool) rowSpec {
	return rowSpec{name: name, unit: unitTimes, lowerBetter: lowerBetter,
		derive: func(med func(name, metric string) float64) (float64, float64) {
			return med(ours, a) / med(ours, b), med(theirs, a) / med(theirs, b)
		}}
}

// withRef is r with its reference named.
func withRef(r rowSpec, ref string) rowSpec {
	r.reference = ref
	return r
}

// startupWorkload is startup+changes: a backlog inserted at start, at low
// priority, while single changes at high priority arrive at 200/s.
func startupWorkload(sz sizes) workload {
	const name = "startup+changes"
	wsz := waitOrderSizes(sz)
	prio := waitorder.Order{Priority: waitorder.StartupPriority}
	w := workload{name: name, variants: []variant{
		{name: "converge-priority", side: sideConverge, run: waitOrderRun(waitorder.RunStartup, waitorder.NewConverge, withFloor(wsz), prio)},
		{name: "converge-fifo", side: sideConverge, run: waitOrderRun(waitorder.RunStartup, waitorder.NewConverge, wsz, waitorder.Order{})},
		{name: "statedb", side: sideStatedb, run: waitOrderRun(waitorder.RunStartup, waitorder.NewStatedb, withFloor(wsz), waitorder.Order{})},
	}}
	// The goals (issue 55): reading a Done backlog costs a change no more
	// than it costs statedb's (the floor), and the backlog's work adds at
	// most half again over what the inserts alone cost (p99-vs-floor).
	p99 := ratioRow(name+"/p99-vs-no-backlog", "converge-priority", "statedb", metricP99, waitorder.AloneP99, true)
	floor := ratioRow(name+"/floor/p99-vs-no-backlog", "converge-priority", "statedb", waitorder.FloorP99, waitorder.AloneP99, true)
	floor.goal = &goal{desc: "converge <=statedb", met: func(o, t float64) bool { return o <= t }}
	vsFloor := ratioRow(name+"/p99-vs-floor", "converge-priority", "statedb", metricP99, waitorder.FloorP99, true)
	vsFloor.goal = &goal{desc: "converge <=1.5x", met: func(o, _ float64) bool { return o <= 1.5 }}
	load := ratioRow(name+"/load-vs-alone", "converge-priority", "statedb", waitorder.LoadSeconds, waitorder.AloneLoad, true)
	load.goal = &goal{desc: "converge <=1.2x", met: func(o, _ float64) bool { return o <= 1.2 }}
	w.rows = []rowSpec{
		{name: name + "/p50", unit: unitMillis, lowerBetter: true, ours: "converge-priority", theirs: "statedb", metric: metricP50},
		{name: name + "/p99", unit: unitMillis, lowerBetter: true, ours: "converge-priority", theirs: "statedb", metric: metricP99},
		p99,
		vsFloor,
		{name: name + "/no-backlog/p99", unit: unitMillis, lowerBetter: true, ours: "converge-priority", theirs: "statedb", metric: waitorder.AloneP99},
		{name: name + "/after-inserts/p99", unit: unitMillis, lowerBetter: true, ours: "converge-priority", theirs: "statedb", metric: waitorder.AfterP99},
		ratioRow(name+"/after-inserts/p99-vs-no-backlog", "converge-priority", "statedb", waitorder.AfterP99, waitorder.AloneP99, true),
		{name: name + "/floor/p99", unit: unitMillis, lowerBetter: true, ours: "converge-priority", theirs: "statedb", metric: waitorder.FloorP99},
		floor,
		{name: name + "/fifo/p99", unit: unitMillis, lowerBetter: true, ours: "converge-fifo", theirs: "statedb", metric: metricP99},
		ratioRow(name+"/fifo/p99-vs-no-backlog", "converge-fifo", "statedb", metricP99, waitorder.AloneP99, true),
		{name: name + "/load", unit: unitSeconds, lowerBetter: true, ours: "converge-priority", theirs: "statedb", metric: waitorder.LoadSeconds},
		{name: name + "/load-bytes", unit: unitBytes, lowerBetter: true, ours: "converge-priority", theirs: "statedb", metric: waitorder.LoadBytes},
		load,
	}
	return w
}

// noisyWorkload is noisy-tenant: tenant A's burst while tenant B changes
// one object every 10 ms, with converge's FairnessKey = tenant and
// without.
func noisyWorkload(sz sizes) workload {
	const name = "noisy-tenant"
	const noKey = "no FairnessKey"
	wsz := waitOrderSizes(sz)
	fair := waitorder.Order{FairnessKey: waitorder.Tenant}
	w := workload{name: name, variants: []variant{
		{name: "converge-fair", side: sideConverge, run: waitOrderRun(waitorder.RunNoisy, waitorder.NewConverge, withFloor(wsz), fair)},
		{name: "converge-unfair", side: sideConverge, run: waitOrderRun(waitorder.RunNoisy, waitorder.NewConverge, withFloor(wsz), waitorder.Order{})},
	}}
	vsAlone := ratioRow(name+"/p99-vs-alone", "converge-fair", "converge-unfair", metricP99, waitorder.AloneP99, true)
	vsAlone.reference = noKey
	vsAlone.goal = &goal{desc: "converge <=5x", met: func(o, _ float64) bool { return o <= 5 }}
	w.rows = []rowSpec{
		{name: name + "/p50", unit: unitMillis, lowerBetter: true, ours: "converge-fair", theirs: "converge-unfair", metric: metricP50, reference: noKey},
		{name: name + "/p99", unit: unitMillis, lowerBetter: true, ours: "converge-fair", theirs: "converge-unfair", metric: metricP99, reference: noKey},
		vsAlone,
		{name: name + "/alone/p99", unit: unitMillis, lowerBetter: true, ours: "converge-fair", theirs: "converge-unfair", metric: waitorder.AloneP99, reference: noKey},
		{name: name + "/after-inserts/p99", unit: unitMillis, lowerBetter: true, ours: "converge-fair", theirs: "converge-unfair", metric: waitorder.AfterP99, reference: noKey},
		withRef(ratioRow(name+"/after-inserts/p99-vs-alone", "converge-fair", "converge-unfair", waitorder.AfterP99, waitorder.AloneP99, true), noKey),
		{name: name + "/floor/p99", unit: unitMillis, lowerBetter: true, ours: "converge-fair", theirs: "converge-unfair", metric: waitorder.FloorP99, reference: noKey},
		withRef(ratioRow(name+"/floor/p99-vs-alone", "converge-fair", "converge-unfair", waitorder.FloorP99, waitorder.AloneP99, true), noKey),
		{name: name + "/load", unit: unitSeconds, lowerBetter: true, ours: "converge-fair", theirs: "converge-unfair", metric: waitorder.LoadSeconds, reference: noKey},
		{name: name + "/load-bytes", unit: unitBytes, lowerBetter: true, ours: "converge-fair", theirs: "converge-unfair", metric: waitorder.LoadBytes, reference: noKey},
	}
	return w
}

// hungWorkload is hung-target: four targets, one of which hangs until
// the operation timeout, with converge's TargetKey and a cap of a quarter
// of the workers per target, and without.
func hungWorkload(sz sizes) workload {
	const name = "hung-target"
	const noCap = "no cap"
	wsz := waitOrderSizes(sz)
	capped := func(t *waitorder.Target) waitorder.Order {
		return waitorder.HungOrder(t, wsz.Concurrency/waitorder.Targets)
	}
	uncapped := func(*waitorder.Target) waitorder.Order { return waitorder.Order{} }
	w := workload{name: name, variants: []variant{
		{name: "converge-capped", side: sideConverge, run: waitOrderRun(waitorder.RunHung, waitorder.NewConverge, wsz, capped)},
		{name: "converge-uncapped", side: sideConverge, run: waitOrderRun(waitorder.RunHung, waitorder.NewConverge, wsz, uncapped)},
	}}
	vsHealthy := ratioRow(name+"/healthy-vs-no-hung", "converge-capped", "converge-uncapped", waitorder.Healthy, waitorder.HealthyAlone, false)
	vsHealthy.reference = noCap
	vsHealthy.goal = &goal{desc: "converge >=0.9x", met: func(o, _ float64) bool { return o >= 0.9 }}
	w.rows = []rowSpec{
		{name: name + "/healthy", unit: unitObjectsPerSec, ours: "converge-capped", theirs: "converge-uncapped", metric: waitorder.Healthy, reference: noCap},
		vsHealthy,
		{name: name + "/no-hung", unit: unitObjectsPerSec, ours: "converge-capped", theirs: "converge-uncapped", metric: waitorder.HealthyAlone, reference: noCap},
	}
	return w
}

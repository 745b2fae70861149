package main

import (
	"context"

	"github.com/converge-go/converge/benchmarks/internal/waitorder"
)

// Variant names: every workload compares converge, given the option the
// workload is about, with controller-runtime's priority queue.
const (
	ours   = "converge"
	theirs = "controller-runtime"
)

// variant is one side of a workload.
type variant struct {
	name string
	run  func(ctx context.Context) (map[string]float64, error)
}

// rowSpec says how one row is computed from the medians of the runs:
// metric's median on each side, or, with over set, metric's median over
// over's on each side.
type rowSpec struct {
	name        string
	unit        string
	lowerBetter bool
	metric      string
	over        string
	goal        *goal
}

// goal is the team's target for converge in a row.
type goal struct {
	desc string
	met  func(converge float64) bool
}

// workload is one named comparison.
type workload struct {
	name     string
	variants []variant
	rows     []rowSpec
}

// Units of rows.
const (
	unitMillis        = "ms"
	unitSeconds       = "s"
	unitObjectsPerSec = "objects/s"
	unitTimes         = "x"
)

// workloads returns the three waiting-order workloads at sz.
func workloads(sz waitorder.Sizes) []workload {
	run := func(f waitorder.Factory, w func(context.Context, waitorder.Factory, waitorder.Sizes, waitorder.Order) (map[string]float64, error), o waitorder.Order) func(context.Context) (map[string]float64, error) {
		return func(ctx context.Context) (map[string]float64, error) { return w(ctx, f, sz, o) }
	}
	hung := func(f waitorder.Factory, order func(*waitorder.Target) waitorder.Order) func(context.Context) (map[string]float64, error) {
		return func(ctx context.Context) (map[string]float64, error) { return waitorder.RunHung(ctx, f, sz, order) }
	}
	prio := waitorder.Order{Priority: waitorder.StartupPriority}
	capped := func(t *waitorder.Target) waitorder.Order {
		return waitorder.HungOrder(t, sz.Concurrency/waitorder.Targets)
	}
	uncapped := func(*waitorder.Target) waitorder.Order { return waitorder.Order{} }
	return []workload{
		{
			name: "startup+changes",
			// Both sides prioritize: the backlog at -100, as
			// controller-runtime puts an initial list.
			variants: []variant{
				{ours, run(waitorder.NewConverge, waitorder.RunStartup, prio)},
				{theirs, run(newCR, waitorder.RunStartup, prio)},
			},
			rows: []rowSpec{
				{name: "p50", unit: unitMillis, lowerBetter: true, metric: waitorder.P50},
				{name: "p99", unit: unitMillis, lowerBetter: true, metric: waitorder.P99},
				{name: "p99-vs-no-backlog", unit: unitTimes, lowerBetter: true, metric: waitorder.P99, over: waitorder.AloneP99,
					goal: &goal{desc: "converge <=2x", met: func(c float64) bool { return c <= 2 }}},
				{name: "no-backlog/p99", unit: unitMillis, lowerBetter: true, metric: waitorder.AloneP99},
				{name: "after-inserts/p99", unit: unitMillis, lowerBetter: true, metric: waitorder.AfterP99},
				{name: "after-inserts/p99-vs-no-backlog", unit: unitTimes, lowerBetter: true, metric: waitorder.AfterP99, over: waitorder.AloneP99},
				{name: "load", unit: unitSeconds, lowerBetter: true, metric: waitorder.LoadSeconds},
				{name: "load-vs-alone", unit: unitTimes, lowerBetter: true, metric: waitorder.LoadSeconds, over: waitorder.AloneLoad,
					goal: &goal{desc: "converge <=1.2x", met: func(c float64) bool { return c <= 1.2 }}},
			},
		},
		{
			name: "noisy-tenant",
			// converge with FairnessKey = tenant; the queue has no
			// fairness key.
			variants: []variant{
				{ours, run(waitorder.NewConverge, waitorder.RunNoisy, waitorder.Order{FairnessKey: waitorder.Tenant})},
				{theirs, run(newCR, waitorder.RunNoisy, waitorder.Order{})},
			},
			rows: []rowSpec{
				{name: "p50", unit: unitMillis, lowerBetter: true, metric: waitorder.P50},
				{name: "p99", unit: unitMillis, lowerBetter: true, metric: waitorder.P99},
				{name: "p99-vs-alone", unit: unitTimes, lowerBetter: true, metric: waitorder.P99, over: waitorder.AloneP99,
					goal: &goal{desc: "converge <=5x", met: func(c float64) bool { return c <= 5 }}},
				{name: "alone/p99", unit: unitMillis, lowerBetter: true, metric: waitorder.AloneP99},
				{name: "after-inserts/p99", unit: unitMillis, lowerBetter: true, metric: waitorder.AfterP99},
				{name: "after-inserts/p99-vs-alone", unit: unitTimes, lowerBetter: true, metric: waitorder.AfterP99, over: waitorder.AloneP99},
				{name: "load", unit: unitSeconds, lowerBetter: true, metric: waitorder.LoadSeconds},
			},
		},
		{
			name: "hung-target",
			// converge with a cap of a quarter of the workers per
			// target; the queue has no cap.
			variants: []variant{
				{ours, hung(waitorder.NewConverge, capped)},
				{theirs, hung(newCR, uncapped)},
			},
			rows: []rowSpec{
				{name: "healthy", unit: unitObjectsPerSec, metric: waitorder.Healthy},
				{name: "healthy-vs-no-hung", unit: unitTimes, metric: waitorder.Healthy, over: waitorder.HealthyAlone,
					goal: &goal{desc: "converge >=0.9x", met: func(c float64) bool { return c >= 0.9 }}},
				{name: "no-hung", unit: unitObjectsPerSec, metric: waitorder.HealthyAlone},
			},
		},
	}
}

package main

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/cilium/statedb"
	sdbrec "github.com/cilium/statedb/reconciler"

	"github.com/converge-go/converge/internal/netroute"
	"github.com/converge-go/converge/reconciler"
)

// metricDrift is the seconds a run took to repair the routes deleted
// behind the reconciler's back.
const metricDrift = "drift-s"

// routesDriftPercent is the share of routes deleted behind the
// reconciler's back in the drift measurement.
const routesDriftPercent = 1

// routesVariant is one contender of the routes workload.
type routesVariant struct {
	name        string
	side        string
	concurrency int
	batch       bool
}

var routesVariants = []routesVariant{
	{name: "converge-c1", side: sideConverge, concurrency: 1},
	{name: "converge-batch", side: sideConverge, concurrency: 1, batch: true},
	{name: "converge-c8", side: sideConverge, concurrency: 8},
	{name: "statedb", side: sideStatedb, concurrency: 1},
	// A reference: statedb's reconciler given the same batch operations
	// as converge-batch, to tell the reconciler's share of the batches'
	// gain from the batching connection's.
	{name: "statedb-batch", side: sideStatedb, concurrency: 1, batch: true},
}

// routesWorkload is routes-<n>: n kernel routes reconciled over netlink
// into a fresh private network namespace per run, by each contender on
// the same operations; then the repair of 1% of them deleted behind its
// back. Where no namespace can be created (not root), it is skipped.
func routesWorkload(sz sizes, n int) workload {
	name := "routes-" + countLabel(n)
	w := workload{name: name, skip: routesUnavailable}
	for _, v := range routesVariants {
		w.variants = append(w.variants, variant{name: v.name, side: v.side, run: func(ctx context.Context) (measure, error) {
			return runRoutes(ctx, v, n, sz.insertBatch)
		}})
	}
	large := n >= 100_000
	for _, v := range routesVariants[:3] {
		row := rowSpec{name: name + "/" + v.name[len("converge-"):], unit: unitObjectsPerSec, ours: v.name, theirs: "statedb", metric: metricThroughput}
		switch {
		case large && v.batch:
			row.goal = &goal{desc: ">=2x statedb", met: func(o, t float64) bool { return o >= 2*t }}
		case large && v.concurrency == 1:
			row.goal = &goal{desc: ">=statedb", met: func(o, t float64) bool { return o >= t }}
		}
		w.rows = append(w.rows, row)
	}
	w.rows = append(w.rows, rowSpec{name: name + "/batch-vs-statedb-batch", unit: unitObjectsPerSec,
		ours: "converge-batch", theirs: "statedb-batch", metric: metricThroughput, reference: "statedb-batch"})
	for _, v := range routesVariants[:2] {
		w.rows = append(w.rows, rowSpec{name: name + "/drift/" + v.name[len("converge-"):], unit: unitSeconds, lowerBetter: true,
			ours: v.name, theirs: "statedb", metric: metricDrift})
	}
	return w
}

// routesUnavailable says why the routes workloads cannot run here, or
// returns nil when a network namespace can be created.
func routesUnavailable() error {
	ns, err := netroute.NewNamespace()
	if err != nil {
		return fmt.Errorf("it needs a private network namespace: %w", err)
	}
	return ns.Close()
}

// runRoutes runs one contender: it inserts n routes Pending in write
// transactions of batch, and measures until all are Done; then it checks
// by listing that the kernel has exactly those routes, deletes 1% of them
// behind the reconciler's back, asks for a full reconciliation and
// measures until Prune has put them back (checked by listing again).
func runRoutes(ctx context.Context, v routesVariant, n, batch int) (measure, error) {
	tg, err := newRouteTarget(v.concurrency, v.batch)
	if err != nil {
		return nil, err
	}
	defer tg.close()
	r, trigger, err := newRoutesRig(ctx, v, tg)
	if err != nil {
		return nil, err
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	runtime.GC()
	t0 := time.Now()
	insertAll(r, n, batch)
	err = r.waitAllDone(ctx)
	d := time.Since(t0)
	if err == nil {
		err = tg.verify(n)
	}
	var drift time.Duration
	if err == nil {
		drift, err = repairDrift(ctx, tg, trigger, n)
	}
	return stopped(r, measure{
		metricThroughput: float64(n) / d.Seconds(),
		metricSeconds:    d.Seconds(),
		metricDrift:      drift.Seconds(),
	}, err)
}

// repairDrift deletes every 100th route behind the reconciler's back and
// times a full reconciliation that puts them back.
func repairDrift(ctx context.Context, tg *routeTarget, trigger func(), n int) (time.Duration, error) {
	var gone []uint64
	for id := 0; id < n; id += 100 / routesDriftPercent {
		gone = append(gone, uint64(id))
	}
	if err := tg.deleteBehindItsBack(ctx, gone); err != nil {
		return 0, fmt.Errorf("deleting routes behind its back: %w", err)
	}
	if err := tg.verify(n); err == nil {
		return 0, fmt.Errorf("the %d routes deleted behind its back are still there", len(gone))
	}
	select { // forget a Prune that ran before
	case <-tg.pruned:
	default:
	}
	t0 := time.Now()
	trigger()
	select {
	case <-tg.pruned:
	case <-ctx.Done():
		return 0, fmt.Errorf("waiting for the repair: %w", ctx.Err())
	}
	d := time.Since(t0)
	if err := tg.verify(n); err != nil {
		return 0, fmt.Errorf("after the repair: %w", err)
	}
	return d, nil
}

// newRoutesRig builds a hive of v's side whose reconciler runs the
// target's operations. It returns the rig and what asks for a full
// reconciliation.
func newRoutesRig(ctx context.Context, v routesVariant, tg *routeTarget) (rig, func(), error) {
	if v.side == sideConverge {
		r := newConvergeTableRig()
		var rec reconciler.Reconciler[*convergeObject]
		r.h = newHive(ctx, func(db *statedb.DB, p reconciler.Params) error {
			table, err := statedb.NewTable(db, "bench-routes", convergeIDIndex, convergeStatusIndex)
			if err != nil {
				return err
			}
			r.db, r.table = db, table
			cfg := convergeConfig(table, rigOptions{concurrency: v.concurrency})
			ops := convergeRouteOps{t: tg}
			cfg.Operations = ops
			if v.batch {
				cfg.BatchOperations = ops
			}
			rec, err = reconciler.New(cfg, p)
			return err
		})
		r.waitAll = convergeWaitAll(r)
		return r, func() { rec.TriggerFullReconciliation() }, r.populate()
	}

	r := newStatedbTableRig()
	var rec sdbrec.Reconciler[*statedbObject]
	var batchOps sdbrec.BatchOperations[*statedbObject]
	if v.batch {
		batchOps = statedbRouteOps{t: tg}
	}
	r.h = newHive(ctx, func(db *statedb.DB, p sdbrec.Params) error {
		table, err := statedb.NewTable(db, "bench-routes", statedbIDIndex, statedbStatusIndex)
		if err != nil {
			return err
		}
		r.db, r.table = db, table
		rec, err = registerStatedb(p, table, statedbRouteOps{t: tg}, batchOps, statedbOptions()...)
		return err
	})
	r.waitAll = statedbWaitAll(r)
	return r, func() { rec.Prune() }, r.populate()
}

// newConvergeTableRig is a converge rig without its hive: what inserts
// Pending objects and tells Done ones.
func newConvergeTableRig() *tableRig[*convergeObject] {
	return &tableRig[*convergeObject]{
		ids: convergeIDIndex,
		pending: func(id uint64) *convergeObject {
			return &convergeObject{ID: id, Status: reconciler.StatusPending()}
		},
		isDone: func(o *convergeObject) bool { return o.Status.Kind == reconciler.StatusKindDone },
	}
}

// newStatedbTableRig is newConvergeTableRig for statedb's objects.
func newStatedbTableRig() *tableRig[*statedbObject] {
	return &tableRig[*statedbObject]{
		ids: statedbIDIndex,
		pending: func(id uint64) *statedbObject {
			return &statedbObject{ID: id, Status: sdbrec.StatusPending()}
		},
		isDone: func(o *statedbObject) bool { return o.Status.Kind == sdbrec.StatusKindDone },
	}
}

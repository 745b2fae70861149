package main

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/converge-go/converge/benchmarks/internal/bench"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

// Issue 19's goals for the source rows.
const (
	sourceEventsGoal = 200_000 // events/s: Cilium's reflector's stated limit
	sourceListGoal   = 300_000 // objects/s of an initial list
	sourceRelistGoal = 2.0     // seconds for a relist of unchanged objects
)

// srcObj is the object of the source workloads: a string key (what
// sources key by), a value and a status.
type srcObj struct {
	Key, Value string
	Status     reconciler.Status
}

func (o *srcObj) TableHeader() []string { return []string{"Key", "Value"} }
func (o *srcObj) TableRow() []string    { return []string{o.Key, o.Value} }

var srcKeyIndex = statedb.Index[*srcObj, string]{
	Name:       "key",
	FromObject: func(o *srcObj) index.KeySet { return index.NewKeySet(index.String(o.Key)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

func srcEqual(a, b *srcObj) bool { return a.Key == b.Key && a.Value == b.Value }

func srcPending(o *srcObj) *srcObj { o.Status = reconciler.StatusPending(); return o }

// countingOps is a target that does nothing and counts Updates: the
// reconciliations a workload causes.
type countingOps struct{ updates atomic.Int64 }

func (o *countingOps) Update(context.Context, statedb.ReadTxn, statedb.Revision, *srcObj) error {
	o.updates.Add(1)
	return nil
}
func (o *countingOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *srcObj) error {
	return nil
}
func (o *countingOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*srcObj, statedb.Revision]) error {
	return nil
}

// sourceRig is a hive with the table, a source registered by addSource
// and, optionally, a converge reconciler over countingOps.
type sourceRig struct {
	h     *hive.Hive
	log   *slog.Logger
	db    *statedb.DB
	table statedb.RWTable[*srcObj]
	src   source.Source
	rec   reconciler.Reconciler[*srcObj]
	ops   countingOps
}

func newSourceRig(withReconciler bool, addSource func(r *sourceRig, p source.Params) (source.Source, error)) *sourceRig {
	r := &sourceRig{log: slog.New(slog.DiscardHandler)}
	r.h = hive.New(
		statedb.Cell, job.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("bench", "Benchmark",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, sp source.Params, rp reconciler.Params) (err error) {
				r.db = db
				if r.table, err = statedb.NewTable(db, "objects", srcKeyIndex); err != nil {
					return err
				}
				if withReconciler {
					r.rec, err = reconciler.New(reconciler.Config[*srcObj]{
						Table:                      r.table,
						GetObjectStatus:            func(o *srcObj) reconciler.Status { return o.Status },
						SetObjectStatus:            func(o *srcObj, s reconciler.Status) *srcObj { o.Status = s; return o },
						CloneObject:                func(o *srcObj) *srcObj { c := *o; return &c },
						Operations:                 &r.ops,
						RoundSize:                  bench.RoundSize,
						FullReconciliationInterval: reconciler.Off,
						RefreshInterval:            reconciler.Off,
						Metrics:                    reconciler.NopMetrics{},
					}, rp)
					if err != nil {
						return err
					}
				}
				r.src, err = addSource(r, sp)
				return err
			}),
		),
	)
	return r
}

func (r *sourceRig) start(ctx context.Context) error { return r.h.Start(r.log, ctx) }
func (r *sourceRig) stop() error                     { return r.h.Stop(r.log, context.Background()) }

// stopped stops the rig and joins its error with err.
func (r *sourceRig) stopped(m measure, err error) (measure, error) {
	if serr := r.stop(); serr != nil && err == nil {
		err = fmt.Errorf("stopping the hive: %w", serr)
	}
	return m, err
}

// waitTable blocks until cond holds for the table, waking on its changes.
func (r *sourceRig) waitTable(ctx context.Context, cond func(statedb.ReadTxn) bool) error {
	for {
		txn := r.db.ReadTxn()
		_, watch := r.table.AllWatch(txn)
		initialized, initWatch := r.table.Initialized(txn)
		if initialized {
			initWatch = nil // closed: it would spin
		}
		if cond(txn) {
			return nil
		}
		select {
		case <-watch:
		case <-initWatch:
		case <-ctx.Done():
			return fmt.Errorf("%w (source status %+v)", ctx.Err(), r.src.Status())
		}
	}
}

// settle waits until the reconciler has settled every change so far.
func (r *sourceRig) settle(ctx context.Context) error {
	return r.rec.WaitUntilSettled(ctx, r.table.Revision(r.db.ReadTxn()))
}

func storeSource(st *sourcetest.Store[string]) func(r *sourceRig, p source.Params) (source.Source, error) {
	return func(r *sourceRig, p source.Params) (source.Source, error) {
		return source.New(source.Config[string, *srcObj]{
			Name:          "store",
			Table:         r.table,
			ListerWatcher: st,
			Transform:     func(key, v string) ([]*srcObj, error) { return []*srcObj{{Key: key, Value: v}}, nil },
			Equal:         srcEqual,
			Pending:       srcPending,
		}, p)
	}
}

func srcKey(i int) string { return fmt.Sprintf("k%07d", i) }

// goalRow is a row whose second column is the goal, not statedb.
func goalRow(name, unit string, lowerBetter bool, variant, metric string, target float64, desc string, met func(ours, goal float64) bool) rowSpec {
	return rowSpec{
		name: name, unit: unit, lowerBetter: lowerBetter, reference: "goal",
		derive: func(med func(name, metric string) float64) (float64, float64) { return med(variant, metric), target },
		ours:   variant, theirs: variant, metric: metric,
		goal: &goal{desc: desc, met: met},
	}
}

// sourceWorkload is issue 19's source layer rows, over an in-memory
// list-and-watch (sourcetest.Store): events applied per second, an initial
// list of sourceObjects, and a relist of them unchanged.
func sourceWorkload(sz sizes) workload {
	n := sz.sourceObjects
	atLeast := func(ours, goal float64) bool { return ours >= goal }
	atMost := func(ours, goal float64) bool { return ours <= goal }
	label := countLabel(n)
	return workload{
		name: "source",
		variants: []variant{
			{name: "events", side: sideConverge, run: func(ctx context.Context) (measure, error) { return runSourceEvents(ctx, n) }},
			{name: "list", side: sideConverge, run: func(ctx context.Context) (measure, error) { return runSourceList(ctx, n) }},
		},
		rows: []rowSpec{
			goalRow("source/events-"+label, unitObjectsPerSec, false, "events", metricThroughput, sourceEventsGoal, ">=200k/s", atLeast),
			goalRow("source/initial-list-"+label, unitObjectsPerSec, false, "list", metricThroughput, sourceListGoal, ">=300k/s", atLeast),
			goalRow("source/relist-"+label+"-unchanged", unitSeconds, true, "list", metricSeconds, sourceRelistGoal, "<=2s", atMost),
			goalRow("source/relist-"+label+"-unchanged/written", unitTimes, true, "list", "written", 0, "0 objects written", func(o, _ float64) bool { return o == 0 }),
			goalRow("source/relist-"+label+"-unchanged/reconciliations", unitTimes, true, "list", metricUpdates, 0, "0 reconciliations", func(o, _ float64) bool { return o == 0 }),
		},
	}
}

// runSourceEvents measures the source layer alone: n changes of
// distinct keys wait in the store's log, the source's list is empty at
// revision 0, and its watch replays the log as fast as the source takes
// it; events applied to the table per second, from the start of the watch
// to the last key in the table. The producer's cost is not in it.
func runSourceEvents(ctx context.Context, n int) (measure, error) {
	st := sourcetest.NewStore[string]()
	for i := range n {
		st.Set(srcKey(i), "v")
	}
	var began time.Time
	lw := source.Funcs[string]{
		ListFunc: func(context.Context) (source.ListResult[string], error) {
			return source.ListResult[string]{Resume: "0"}, nil
		},
		WatchFunc: func(ctx context.Context, resume string, emit func(source.Event[string]) error) error {
			began = time.Now()
			return st.Watch(ctx, resume, emit)
		},
	}
	r := newSourceRig(false, func(r *sourceRig, p source.Params) (source.Source, error) {
		return source.New(source.Config[string, *srcObj]{
			Name: "events", Table: r.table, ListerWatcher: lw,
			Transform: func(key, v string) ([]*srcObj, error) { return []*srcObj{{Key: key, Value: v}}, nil },
			Equal:     srcEqual, Pending: srcPending,
		}, p)
	})
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	err := r.waitTable(ctx, func(txn statedb.ReadTxn) bool { return r.table.NumObjects(txn) == n })
	return r.stopped(measure{metricThroughput: float64(n) / time.Since(began).Seconds()}, err)
}

// runSourceList fills a store with n items, starts a source and a
// reconciler, and measures the initial list (objects per second until the
// table is initialized), then a relist of the unchanged items: how long it
// takes, the objects it writes (table revisions) and the reconciliations
// it causes (Updates).
func runSourceList(ctx context.Context, n int) (measure, error) {
	st := sourcetest.NewStore[string]()
	for i := range n {
		st.Set(srcKey(i), "v")
	}
	st.Compact() // the log is not needed: the source lists
	r := newSourceRig(true, storeSource(st))
	began := time.Now()
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	m := measure{}
	err := r.waitTable(ctx, func(txn statedb.ReadTxn) bool { init, _ := r.table.Initialized(txn); return init })
	if err != nil {
		return r.stopped(nil, err)
	}
	m[metricThroughput] = float64(n) / time.Since(began).Seconds()
	if err := r.settle(ctx); err != nil {
		return r.stopped(nil, err)
	}
	rev, updates := r.table.Revision(r.db.ReadTxn()), r.ops.updates.Load()
	relists := r.src.Status().Relists
	began = time.Now()
	r.src.Resync()
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for r.src.Status().Relists == relists {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return r.stopped(nil, ctx.Err())
		}
	}
	m[metricSeconds] = time.Since(began).Seconds()
	if err := r.settle(ctx); err != nil {
		return r.stopped(nil, err)
	}
	m["written"] = float64(r.table.Revision(r.db.ReadTxn()) - rev)
	m[metricUpdates] = float64(r.ops.updates.Load() - updates)
	return r.stopped(m, nil)
}

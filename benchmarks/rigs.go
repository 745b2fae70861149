package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	sdbrec "github.com/cilium/statedb/reconciler"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/benchmarks/internal/bench"
	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

// preloadAge is how old the UpdatedAt of preloaded Done objects is: older
// than any refresh interval used here, so a full reconciliation refreshes
// every one of them.
const preloadAge = 2 * time.Hour

// statedbRefreshInterval is statedb's refresh interval in the full
// workload. Preloaded objects (preloadAge old) are all due at once, and an
// object refreshed during the run is not due again for an hour, so the
// refresh loop makes exactly one pass. statedb cannot be given a tiny
// interval: its refresh loop would then refresh every object again and
// again, and "every object Done" would never hold.
const statedbRefreshInterval = time.Hour

// logger is what the hives log to: errors only, on stderr.
var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// rigOptions describes one run's hive.
type rigOptions struct {
	target      *target
	concurrency int  // converge's Config.Concurrency; statedb is sequential
	full        bool // configure pruning and refreshing for the full workload
	preload     int  // objects inserted Done (and aged) before the hive starts
	prometheus  bool // converge reports to Prometheus metrics instead of NopMetrics

	// bare is statedb's own 1M-object benchmark's shape
	// (statedb/reconciler/benchmark): a table with its primary index
	// only, no status index, and "all Done" awaited on the last object
	// inserted, whose Done means every earlier one is (both reconcile
	// in revision order). With nothing else to pay for, a status write
	// costs the table least, and the reconciler's own cost shows most.
	bare bool
	// last is the ID of the last object a bare run inserts.
	last uint64

	// render, when set, is a whole-set target used instead of target's
	// operations (sync-storm): converge's SyncOperations, statedb's
	// BatchOperations that render the whole table.
	render *renderTarget
}

// rig is one run: a hive with statedb, a table of n objects and one
// reconciler (or none, for the table-limit runs). Build it with
// newConvergeRig or newStatedbRig, start it, drive it, stop it.
type rig interface {
	// start starts the hive and, with the full option, triggers a full
	// reconciliation. ctx carries the run's profiler labels.
	start(ctx context.Context) error
	// insertPending inserts objects [from, to) as Pending in one write
	// transaction.
	insertPending(from, to int)
	// touch changes object id's value and marks it Pending. It returns the
	// object's new revision and the time taken just before the commit.
	touch(id int) (statedb.Revision, time.Time)
	// waitObjectDone waits until object id is Done at a revision after rev.
	waitObjectDone(ctx context.Context, id int, rev statedb.Revision) error
	// waitAllDone waits until no object is Pending, Refreshing or Error.
	waitAllDone(ctx context.Context) error
	// waitNonePending waits until no object is Pending: every one has
	// been attempted at least once.
	waitNonePending(ctx context.Context) error
	// stop stops the hive; no goroutine of it survives.
	stop() error
}

// tableRig is the rig of either side; the functions fill in what differs.
type tableRig[Obj any] struct {
	h       *hive.Hive
	db      *statedb.DB
	table   statedb.RWTable[Obj]
	ids     statedb.Index[Obj, uint64]
	full    bool
	preload int

	pending   func(id uint64) Obj         // a new Pending object
	aged      func(id uint64) Obj         // a Done object, preloadAge old
	touched   func(Obj) Obj               // a clone with a new value, Pending
	isDone    func(Obj) bool              // its status is Done
	waitAll   func(context.Context) error // no object Pending, Refreshing or Error
	waitTried func(context.Context) error // no object Pending
	trigger   func()                      // ask for a full reconciliation
}

func (r *tableRig[Obj]) populate() error {
	if err := r.h.Populate(logger); err != nil {
		return err
	}
	return bench.Preload(r.db, r.table, r.preload, bench.RoundSize, r.aged)
}

func (r *tableRig[Obj]) start(ctx context.Context) error {
	err := r.h.Start(logger, context.Background())
	// hive's job package clears the profiler labels of the goroutine that
	// starts it; put the run's back.
	pprof.SetGoroutineLabels(ctx)
	if err != nil {
		return err
	}
	if r.full {
		r.trigger()
	}
	return nil
}

func (r *tableRig[Obj]) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.h.Stop(logger, ctx)
}

func (r *tableRig[Obj]) insertPending(from, to int) {
	wtxn := r.db.WriteTxn(r.table)
	for id := from; id < to; id++ {
		r.table.Insert(wtxn, r.pending(uint64(id)))
	}
	wtxn.Commit()
}

func (r *tableRig[Obj]) touch(id int) (statedb.Revision, time.Time) {
	wtxn := r.db.WriteTxn(r.table)
	obj, _, found := r.table.Get(wtxn, r.ids.Query(uint64(id)))
	if !found {
		panic(fmt.Sprintf("touch: object %d not in the table", id))
	}
	r.table.Insert(wtxn, r.touched(obj))
	rev := r.table.Revision(wtxn)
	at := time.Now()
	wtxn.Commit()
	return rev, at
}

func (r *tableRig[Obj]) waitObjectDone(ctx context.Context, id int, after statedb.Revision) error {
	for {
		obj, rev, watch, found := r.table.GetWatch(r.db.ReadTxn(), r.ids.Query(uint64(id)))
		if found && rev > after && r.isDone(obj) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("object %d not Done: %w", id, ctx.Err())
		case <-watch:
		}
	}
}

func (r *tableRig[Obj]) waitAllDone(ctx context.Context) error { return r.waitAll(ctx) }

func (r *tableRig[Obj]) waitNonePending(ctx context.Context) error { return r.waitTried(ctx) }

// newHive is the hive of every run: statedb, jobs, health and one module
// whose invoke creates the table and the reconciler. The module's jobs
// carry the profiler labels of ctx, so that a CPU profile tells the runs
// apart (go tool pprof -tagfocus variant=converge).
func newHive(ctx context.Context, invoke any) *hive.Hive {
	var kv []string
	pprof.ForLabels(ctx, func(k, v string) bool { kv = append(kv, k, v); return true })
	labels := pprof.Labels(kv...)
	return hive.New(
		statedb.Cell,
		job.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("bench", "Benchmark",
			cell.Provide(func(r job.Registry, h cell.Health) job.Group {
				return r.NewGroup(h, job.WithPprofLabels(labels))
			}),
			cell.Invoke(invoke),
		),
	)
}

// convergeConfig is the converge reconciler of a run.
func convergeConfig(table statedb.RWTable[*convergeObject], opts rigOptions) reconciler.Config[*convergeObject] {
	cfg := reconciler.Config[*convergeObject]{
		Table:                      table,
		GetObjectStatus:            func(o *convergeObject) reconciler.Status { return o.Status },
		SetObjectStatus:            func(o *convergeObject, s reconciler.Status) *convergeObject { o.Status = s; return o },
		CloneObject:                (*convergeObject).clone,
		Operations:                 convergeOps{t: opts.target},
		RoundSize:                  bench.RoundSize,
		RoundRateLimiter:           rate.NewLimiter(bench.RoundRate, 1),
		Concurrency:                max(opts.concurrency, 1),
		RetryBackoffMin:            bench.RetryBackoffMin,
		RetryBackoffMax:            bench.RetryBackoffMax,
		FullReconciliationInterval: reconciler.Off,
		RefreshInterval:            reconciler.Off,
		Metrics:                    reconciler.NopMetrics{},
	}
	if opts.prometheus {
		prom, err := metrics.NewPrometheus(prometheus.NewRegistry())
		if err != nil {
			panic(err) // a fresh registry cannot clash
		}
		cfg.Metrics = prom
	}
	if opts.full {
		// Full reconciliation only on TriggerFullReconciliation; refresh
		// every object Done for an hour (all preloaded ones), unthrottled.
		cfg.RefreshInterval = statedbRefreshInterval
		cfg.RefreshRateLimiter = rate.NewLimiter(rate.Inf, 1)
	}
	if opts.render != nil {
		convergeSyncOps{t: opts.render}.useSync(&cfg)
	}
	return cfg
}

// newConvergeRig builds (and populates) a hive with a converge reconciler,
// or with none when opts.target is nil.
func newConvergeRig(ctx context.Context, opts rigOptions) (*tableRig[*convergeObject], error) {
	r := &tableRig[*convergeObject]{
		ids:     convergeIDIndex,
		full:    opts.full,
		preload: opts.preload,
		pending: func(id uint64) *convergeObject {
			return &convergeObject{ID: id, Status: reconciler.StatusPending()}
		},
		aged: func(id uint64) *convergeObject {
			return &convergeObject{ID: id, Status: reconciler.Status{Kind: reconciler.StatusKindDone, UpdatedAt: time.Now().Add(-preloadAge)}}
		},
		touched: func(o *convergeObject) *convergeObject {
			o = o.clone()
			o.Value++
			o.Status = reconciler.StatusPending()
			return o
		},
		isDone: func(o *convergeObject) bool { return o.Status.Kind == reconciler.StatusKindDone },
	}
	var rec reconciler.Reconciler[*convergeObject]
	r.h = newHive(ctx, func(db *statedb.DB, p reconciler.Params) error {
		table, err := newTable(db, opts.bare, convergeIDIndex, convergeStatusIndex)
		if err != nil {
			return err
		}
		r.db, r.table = db, table
		if opts.target == nil {
			return nil
		}
		rec, err = reconciler.New(convergeConfig(table, opts), p)
		return err
	})
	r.waitAll = convergeWaitAll(r)
	if opts.bare {
		r.waitAll = r.waitLastDone(opts.last)
	}
	r.waitTried = func(ctx context.Context) error {
		return waitNoneOf(ctx, r.db, r.table.ToTable(), convergeStatusIndex.Query(reconciler.StatusKindPending))
	}
	r.trigger = func() { rec.TriggerFullReconciliation() }
	return r, r.populate()
}

// newStatedbRig builds (and populates) a hive with a statedb reconciler,
// or with none when opts.target is nil.
func newStatedbRig(ctx context.Context, opts rigOptions) (*tableRig[*statedbObject], error) {
	r := &tableRig[*statedbObject]{
		ids:     statedbIDIndex,
		full:    opts.full,
		preload: opts.preload,
		pending: func(id uint64) *statedbObject {
			return &statedbObject{ID: id, Status: sdbrec.StatusPending()}
		},
		aged: func(id uint64) *statedbObject {
			return &statedbObject{ID: id, Status: sdbrec.Status{Kind: sdbrec.StatusKindDone, UpdatedAt: time.Now().Add(-preloadAge)}}
		},
		touched: func(o *statedbObject) *statedbObject {
			o = o.clone()
			o.Value++
			o.Status = sdbrec.StatusPending()
			return o
		},
		isDone: func(o *statedbObject) bool { return o.Status.Kind == sdbrec.StatusKindDone },
	}
	var rec sdbrec.Reconciler[*statedbObject]
	r.h = newHive(ctx, func(db *statedb.DB, p sdbrec.Params) error {
		table, err := newTable(db, opts.bare, statedbIDIndex, statedbStatusIndex)
		if err != nil {
			return err
		}
		r.db, r.table = db, table
		if opts.target == nil {
			return nil
		}
		options := statedbOptions()
		if opts.full {
			options = append(options, sdbrec.WithRefreshing(statedbRefreshInterval, rate.NewLimiter(rate.Inf, 1)))
		}
		var ops sdbrec.Operations[*statedbObject] = statedbOps{t: opts.target}
		var batchOps sdbrec.BatchOperations[*statedbObject]
		if opts.render != nil {
			render := statedbRenderOps{t: opts.render, table: table}
			ops, batchOps = render, render
			options = append(options, statedbRoundLimit())
		}
		rec, err = registerStatedb(p, table, ops, batchOps, options...)
		return err
	})
	r.waitAll = statedbWaitAll(r)
	if opts.bare {
		r.waitAll = r.waitLastDone(opts.last)
	}
	r.waitTried = func(ctx context.Context) error {
		return waitNoneOf(ctx, r.db, r.table.ToTable(), statedbStatusIndex.Query(sdbrec.StatusKindPending))
	}
	r.trigger = func() { rec.Prune() }
	return r, r.populate()
}

// statedbOptions are the options every statedb reconciler of the
// benchmarks starts from.
func statedbOptions() []sdbrec.Option {
	return []sdbrec.Option{
		sdbrec.WithRoundLimits(bench.RoundSize, rate.NewLimiter(bench.RoundRate, 1)),
		sdbrec.WithRetry(bench.RetryBackoffMin, bench.RetryBackoffMax),
		sdbrec.WithMetrics(statedbNopMetrics{}),
		// No periodic pruning (its default prunes on start and hourly);
		// Prune() still triggers one.
		sdbrec.WithoutPruning(),
		// No refreshing: its default, despite the doc, is every 30m.
		sdbrec.WithRefreshing(0, nil),
	}
}

// registerStatedb registers statedb's reconciler of table with ops.
func registerStatedb(p sdbrec.Params, table statedb.RWTable[*statedbObject], ops sdbrec.Operations[*statedbObject],
	batchOps sdbrec.BatchOperations[*statedbObject], options ...sdbrec.Option) (sdbrec.Reconciler[*statedbObject], error) {
	return sdbrec.Register(p, table,
		(*statedbObject).clone,
		func(o *statedbObject, s sdbrec.Status) *statedbObject { o.Status = s; return o },
		func(o *statedbObject) sdbrec.Status { return o.Status },
		ops, batchOps, options...)
}

package main

import (
	"context"
	"iter"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/cilium/statedb"
	sdbindex "github.com/cilium/statedb/index"
	sdbrec "github.com/cilium/statedb/reconciler"

	"github.com/converge-go/converge/reconciler"
)

// The dependency workloads' objects are the other workloads' objects; who
// depends on whom is a function of the ID (a parent), so that the objects
// need no field for it and both sides' objects stay as they are.

// depRetryWait is how long an Update that finds its dependency not Done
// asks to wait, as one would do without Config.DependsOn.
const depRetryWait = 100 * time.Millisecond

// errDepNotDone is what statedb's side returns while a dependency is not
// Done: statedb's reconciler has no RetryAfter, only its backoff.
var errDepNotDone = &depNotDone{}

type depNotDone struct{}

func (*depNotDone) Error() string { return "dependency not Done" }

// parentFunc names the one object id depends on, if any.
type parentFunc func(id uint64) (uint64, bool)

// dependsOnParent is Config.DependsOn for parent.
func dependsOnParent(parent parentFunc) func(*convergeObject) []sdbindex.Key {
	return func(o *convergeObject) []sdbindex.Key {
		if p, ok := parent(o.ID); ok {
			return []sdbindex.Key{sdbindex.Uint64(p)}
		}
		return nil
	}
}

// depsTarget is the dependency workloads' target: converge's Operations,
// with what the rows need recorded.
type depsTarget struct {
	delay time.Duration // each Update (that does not wait for a dependency) sleeps this long

	// retryParent, when set, makes Update look its object's parent up
	// and return RetryAfter(depRetryWait, nil) while it is not Done:
	// dependencies the way one has them without Config.DependsOn.
	retryParent parentFunc
	table       statedb.Table[*convergeObject]

	// started and returned, when not nil, record by ID when the object's
	// last Update began and returned (UnixNano).
	started, returned []atomic.Int64

	updates    atomic.Int64
	retries    atomic.Int64 // Updates that found their dependency not Done
	deletes    atomic.Int64
	deleteGoal int64
	deleted    chan struct{} // closed at deleteGoal Deletes
}

func newDepsTarget() *depsTarget { return &depsTarget{deleted: make(chan struct{})} }

// stamp makes the target record when each of ids [0, n) is updated.
func (t *depsTarget) stamp(n int) {
	t.started, t.returned = make([]atomic.Int64, n), make([]atomic.Int64, n)
}

func (t *depsTarget) Update(ctx context.Context, txn statedb.ReadTxn, _ statedb.Revision, obj *convergeObject) error {
	t.updates.Add(1)
	if t.started != nil {
		t.started[obj.ID].Store(time.Now().UnixNano())
	}
	if t.retryParent != nil {
		if p, ok := t.retryParent(obj.ID); ok {
			dep, _, found := t.table.Get(txn, convergeIDIndex.Query(p))
			if !found || dep.Status.Kind != reconciler.StatusKindDone {
				t.retries.Add(1)
				return reconciler.RetryAfter(depRetryWait, nil)
			}
		}
	}
	if t.delay > 0 {
		sleep(ctx, t.delay)
	}
	if t.returned != nil {
		t.returned[obj.ID].Store(time.Now().UnixNano())
	}
	return nil
}

func (t *depsTarget) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *convergeObject) error {
	if t.deletes.Add(1) == t.deleteGoal {
		close(t.deleted)
	}
	return nil
}

func (t *depsTarget) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*convergeObject, statedb.Revision]) error {
	return nil
}

// statedbDepsOps is statedb's side of the forest with dependencies
// checked in Update: an error while the parent is not Done, retried with
// statedb's backoff.
type statedbDepsOps struct {
	delay   time.Duration
	parent  parentFunc
	table   statedb.Table[*statedbObject]
	retries *atomic.Int64
}

func (o statedbDepsOps) Update(ctx context.Context, txn statedb.ReadTxn, _ statedb.Revision, obj *statedbObject) error {
	if p, ok := o.parent(obj.ID); ok {
		dep, _, found := o.table.Get(txn, statedbIDIndex.Query(p))
		if !found || dep.Status.Kind != sdbrec.StatusKindDone {
			o.retries.Add(1)
			return errDepNotDone
		}
	}
	if o.delay > 0 {
		sleep(ctx, o.delay)
	}
	return nil
}

func (statedbDepsOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *statedbObject) error {
	return nil
}

func (statedbDepsOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*statedbObject, statedb.Revision]) error {
	return nil
}

// forestParent is the parent function of a forest of n objects with roots
// roots and depth levels: the roots are [0, roots), the other objects are
// split evenly over depth-1 levels after them, and an object's parent is
// in the level above, round robin.
func forestParent(n, roots, depth int) parentFunc {
	starts := []int{0, roots}
	rest := n - roots
	for l := 1; l < depth; l++ {
		starts = append(starts, roots+rest*l/(depth-1))
	}
	return func(id uint64) (uint64, bool) {
		i := int(id)
		if i < roots {
			return 0, false
		}
		l := 1
		for starts[l+1] <= i {
			l++
		}
		above := starts[l] - starts[l-1]
		return uint64(starts[l-1] + (i-starts[l])%above), true
	}
}

// shuffled is the ids [0, n) in a fixed pseudo-random order: the same for
// every run and side, and one in which a dependent is as often inserted
// before its dependency as after it.
func shuffled(n int) []uint64 {
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = uint64(i)
	}
	rnd := rand.New(rand.NewPCG(51, 51))
	rnd.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	return ids
}

// insertIDs inserts the objects ids as Pending, batch per write
// transaction, in that order.
func insertIDs[Obj any](r *tableRig[Obj], ids []uint64, batch int) {
	for from := 0; from < len(ids); from += batch {
		wtxn := r.db.WriteTxn(r.table)
		for _, id := range ids[from:min(from+batch, len(ids))] {
			r.table.Insert(wtxn, r.pending(id))
		}
		wtxn.Commit()
	}
}

// deleteRange deletes the objects [0, n) from the table, batch per write
// transaction, in that order.
func deleteRange(r *tableRig[*convergeObject], n, batch int) {
	for from := 0; from < n; from += batch {
		wtxn := r.db.WriteTxn(r.table)
		for id := from; id < min(from+batch, n); id++ {
			r.table.Delete(wtxn, &convergeObject{ID: uint64(id)})
		}
		wtxn.Commit()
	}
}

// newDepsRig builds (and populates) a converge hive whose reconciler runs
// tg's operations at concurrency, with dependsOn as Config.DependsOn (nil:
// none).
func newDepsRig(ctx context.Context, tg *depsTarget, concurrency int, dependsOn func(*convergeObject) []sdbindex.Key) (*tableRig[*convergeObject], error) {
	r, _, err := newDepsRigWith(ctx, tg, concurrency, func(_ *statedb.DB, cfg *reconciler.Config[*convergeObject]) error {
		cfg.DependsOn = dependsOn
		return nil
	})
	return r, err
}

// newDepsRigWith is newDepsRig with setup completing the Config (it may
// register more tables in db), and the reconciler returned.
func newDepsRigWith(ctx context.Context, tg *depsTarget, concurrency int,
	setup func(db *statedb.DB, cfg *reconciler.Config[*convergeObject]) error,
) (*tableRig[*convergeObject], reconciler.Reconciler[*convergeObject], error) {
	r := newConvergeTableRig()
	var rec reconciler.Reconciler[*convergeObject]
	r.h = newHive(ctx, func(db *statedb.DB, p reconciler.Params) error {
		table, err := statedb.NewTable(db, "bench-deps", convergeIDIndex, convergeStatusIndex)
		if err != nil {
			return err
		}
		r.db, r.table, tg.table = db, table, table
		cfg := convergeConfig(table, rigOptions{concurrency: concurrency})
		cfg.Operations = tg
		if err := setup(db, &cfg); err != nil {
			return err
		}
		rec, err = reconciler.New(cfg, p)
		return err
	})
	r.waitAll = convergeWaitAll(r)
	if err := r.populate(); err != nil {
		return nil, nil, err
	}
	if err := r.start(ctx); err != nil {
		return nil, nil, err
	}
	return r, rec, nil
}

// newStatedbDepsRig is statedb's reconciler over statedbDepsOps.
func newStatedbDepsRig(ctx context.Context, ops statedbDepsOps) (*tableRig[*statedbObject], error) {
	r := newStatedbTableRig()
	r.h = newHive(ctx, func(db *statedb.DB, p sdbrec.Params) error {
		table, err := statedb.NewTable(db, "bench-deps", statedbIDIndex, statedbStatusIndex)
		if err != nil {
			return err
		}
		r.db, r.table = db, table
		ops.table = table
		_, err = registerStatedb(p, table, ops, nil, statedbOptions()...)
		return err
	})
	r.waitAll = statedbWaitAll(r)
	if err := r.populate(); err != nil {
		return nil, err
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

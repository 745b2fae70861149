package reconciler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/cilium/statedb"
)

// What runs off the loop: operations on the workers (internal/workers) or
// on a Sync's goroutine, guarded by the operation timeout and panic
// recovery (call). They are handed values and hand values back (result,
// then outcome and verdict as the commit judges them): none of it touches
// the request table.

// opEntry is one object of a task.
type opEntry[Obj any] struct {
	key      string
	row      *request[Obj] // the loop's row (only the loop reads it): the result finds it without a lookup
	obj      Obj
	rev      statedb.Revision
	attempt  uint64
	failures int
	// asked, when set, is written into the clone before Update: a
	// retry's object carries the status that asked for the work.
	asked *Status
	// queuedAt (Unix nanoseconds) and class are, for observers only,
	// when the request was queued and why (observe_engine.go).
	queuedAt int64
	class    ReadWhy
}

// task is one unit of work for a worker: one object, a batch, or a prune.
type task[Obj any] struct {
	op Op
	// one is the entry of a single object's task; entries those of a
	// batch. Tasks are values in the pool's reused queue, so a single
	// object's task allocates nothing.
	one     opEntry[Obj]
	entries []opEntry[Obj]
	txn     statedb.ReadTxn
	attempt uint64 // a prune's attempt id
	// unowned is, for a prune with Config.Ownership, a copy of the keys
	// the request table holds NotOwned: the prune is not given them.
	unowned map[string]struct{}
}

// result is what became of one object's attempt (or of a prune).
type result[Obj any] struct {
	op      Op
	key     string
	row     *request[Obj] // the entry's row (opEntry.row)
	attempt uint64
	rev     statedb.Revision // the revision the operation saw
	target  Obj              // the clone the operation was given
	cloned  bool
	// notOwned: the key (for a prune, the whole set) was not owned when
	// the worker came to start the operation; nothing ran.
	notOwned bool
	err      error
	// overdue marks the result the pool posts when an attempt passes
	// OperationTimeout: it counts as failed from then on, though it may
	// still run; its own result, when it comes, is not wanted.
	overdue  bool
	declined obsMask // the observers that declined the attempt (AttemptFilter)
}

// runner runs the per-object loop's tasks on the workers. It reads only
// the task and the Config.
type runner[Obj comparable] struct {
	*reconciler[Obj]
	// nopMetrics skips timing operations nobody records: two clock
	// reads per object add up at a million objects.
	nopMetrics bool
}

// tasks appends the tasks of the taken requests to buf: one per object,
// or (batch) one batch of updates and one of deletes.
func (x *runner[Obj]) tasks(buf []task[Obj], taken []*request[Obj], txn statedb.ReadTxn, batch bool) []task[Obj] {
	entry := func(r *request[Obj]) opEntry[Obj] {
		en := opEntry[Obj]{key: r.key, row: r, obj: r.obj, rev: r.rev, attempt: r.attempt, failures: r.attempts}
		if r.tried && !r.deleted {
			asked := r.asked // a copy: the loop may change r meanwhile
			en.asked = &asked
		}
		if x.obs != nil {
			en.queuedAt, en.class = r.pickedAt.UnixNano(), readClass(r)
		}
		return en
	}
	if !batch {
		for _, r := range taken {
			op := OpUpdate
			if r.deleted {
				op = OpDelete
			}
			buf = append(buf, task[Obj]{op: op, one: entry(r), txn: txn})
		}
		return buf
	}
	updates := task[Obj]{op: OpUpdateBatch, txn: txn}
	deletes := task[Obj]{op: OpDeleteBatch, txn: txn}
	for _, r := range taken {
		if r.deleted {
			deletes.entries = append(deletes.entries, entry(r))
		} else {
			updates.entries = append(updates.entries, entry(r))
		}
	}
	for _, t := range []task[Obj]{updates, deletes} {
		if len(t.entries) > 0 {
			buf = append(buf, t)
		}
	}
	return buf
}

// taskOf is the index in tasks (built by runner.tasks) of the task of
// the i-th request taken.
func taskOf[Obj any](tasks []task[Obj], i int, deleted bool) int {
	switch {
	case len(tasks) == 0 || tasks[0].entries == nil:
		return i
	case deleted && tasks[0].op == OpUpdateBatch:
		return 1
	}
	return 0
}

// overdue is what an attempt of t counts as once it ran past its
// deadline: failed, though it may still run.
func overdue[Obj any](t *task[Obj]) []result[Obj] {
	out := make([]result[Obj], 0, max(len(t.entries), 1))
	switch t.op {
	case OpPrune:
		out = append(out, result[Obj]{op: t.op, attempt: t.attempt, overdue: true})
	case OpUpdate, OpDelete:
		out = append(out, result[Obj]{op: t.op, key: t.one.key, row: t.one.row, attempt: t.one.attempt, rev: t.one.rev, overdue: true})
	}
	for _, en := range t.entries {
		out = append(out, result[Obj]{op: t.op, key: en.key, row: en.row, attempt: en.attempt, rev: en.rev, overdue: true})
	}
	return out
}

// runTask runs one task on a worker and returns its results: one per
// object, or one for a prune.
func (x *runner[Obj]) runTask(ctx context.Context, t *task[Obj], overrun func(), out []result[Obj]) []result[Obj] {
	switch t.op {
	case OpUpdate, OpDelete:
		return append(out, x.runOne(ctx, t, overrun))
	case OpUpdateBatch, OpDeleteBatch:
		return append(out, x.runBatch(ctx, t, overrun)...)
	default:
		return append(out, x.runPrune(ctx, t, overrun))
	}
}

// claim runs on the worker right before an operation on key starts (nil:
// a Prune or a Sync, under the claim of the whole set): it returns the
// context the operation runs under and the release to call once it has
// returned; ok is false when this replica no longer owns key: nothing
// starts. A task still queued (or dropped at Stop) holds no claim, so a
// handover never waits for it.
func (x *runner[Obj]) claim(ctx context.Context, key []byte) (context.Context, func(), bool) {
	if own := x.cfg.Ownership; own != nil {
		return own.Acquire(ctx, key)
	}
	return ctx, noRelease, true
}

// noRelease is claim's release without Config.Ownership: a package-level
// func, since a literal in a generic method is allocated on every call.
var noRelease = func() {}

// prepare clones an entry's object for its operation; a retry's clone
// carries the status that asked for the work.
func (x *runner[Obj]) prepare(en *opEntry[Obj]) (Obj, error) {
	target, err := x.clone(en.obj)
	if err == nil && en.asked != nil {
		target = x.cfg.SetObjectStatus(target, *en.asked)
	}
	return target, err
}

func (x *runner[Obj]) runOne(ctx context.Context, t *task[Obj], overrun func()) result[Obj] {
	en := &t.one
	res := result[Obj]{op: t.op, key: en.key, row: en.row, attempt: en.attempt, rev: en.rev}
	ctx, release, owned := x.claim(ctx, keyBytes(en.key))
	if !owned {
		res.notOwned = true // nothing ran
		return res
	}
	defer release() // once the operation has returned, timed out or not
	var start time.Time
	if x.obs != nil {
		start, res.declined = x.obs.attempt(ctx, t.op, en)
	}
	if start.IsZero() && !x.nopMetrics {
		start = time.Now()
	}
	res.err = x.call(ctx, overrun, t.op, en.key, en.failures, func(ctx context.Context) error {
		target, err := x.prepare(en)
		if err != nil {
			return err
		}
		res.target, res.cloned = target, true
		if t.op == OpUpdate {
			return x.cfg.Operations.Update(ctx, t.txn, en.rev, target)
		}
		return x.cfg.Operations.Delete(ctx, t.txn, en.rev, target)
	})
	var end time.Time // one clock read for the observers and the metrics
	if x.obs != nil {
		end = x.obs.finished(t.op, en, x.classify(res.err, en.failures), res.err, start, res.declined)
	}
	if !x.nopMetrics {
		if end.IsZero() {
			end = time.Now()
		}
		x.metrics.Operation(t.op, x.classify(res.err, en.failures), 1, end.Sub(start))
	}
	return res
}

// runSync runs one Sync of run, under the claim of the whole set, with
// every change of its snapshot in revision order. Not leading any more:
// RetryAfter(0, nil), nothing ran and nothing failed.
func (x *runner[Obj]) runSync(ctx context.Context, run *syncRun[Obj], overrun func()) error {
	if run.all {
		// Nothing is known of what an earlier run applied: every object.
		for obj, rev := range x.cfg.Table.All(run.txn) {
			run.changes = append(run.changes, Change[Obj]{Object: obj, Revision: rev})
		}
	}
	slices.SortFunc(run.changes, func(a, b Change[Obj]) int { return cmp.Compare(a.Revision, b.Revision) })
	ctx, release, ok := x.claim(ctx, nil)
	if !ok {
		return RetryAfter(0, nil)
	}
	defer release()
	desired := x.cfg.Table.All(run.txn)
	if x.cfg.DependsOn != nil {
		desired = depOrder(desired, x.keyOf, x.cfg.DependsOn) // dependencies first
	}
	return x.call(ctx, overrun, OpSync, "", run.failures, func(ctx context.Context) error {
		return x.cfg.SyncOperations.Sync(ctx, run.txn, desired, slices.Values(run.changes))
	})
}

// call runs one operation with the operation timeout and turns a panic
// into an error wrapping ErrPanic. When the deadline passes while fn still
// runs, overrun is called (on the timer's goroutine; call returns only
// once it has): the loop counts the attempt as failed from then on, and
// call returns ErrTimeout whatever fn returns, so that a late result reads
// the same whichever of the two the loop sees first. A panic's stack is
// logged when a key first panics (failures == 0), not on every retry.
func (x *runner[Obj]) call(ctx context.Context, overrun func(), op Op, key string, failures int, fn func(context.Context) error) (err error) {
	if x.cfg.OperationTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, x.cfg.OperationTimeout)
		defer cancel()
		overran, decided := false, make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(decided)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				overran = true
				overrun()
			}
		})
		// Deferred before the recover below, so it runs after it: it has
		// the last word on err.
		defer func() {
			if !stop() {
				<-decided // overrun ran (or runs): let it finish deciding
			}
			if overran {
				err = timeoutError(op, x.cfg.OperationTimeout)
			}
		}()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: %v", ErrPanic, op, p)
			if failures == 0 {
				args := []any{"op", op, "panic", p, "stack", string(debug.Stack())}
				if key != "" {
					args = append(args, "key", printableKey(key))
				}
				x.log.Error("Operation panicked; recovered", args...)
			}
		}
	}()
	err = safeErr(op, fn(ctx))
	if err != nil && x.cfg.OperationTimeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		// Failed at its deadline, most often of it, before overrun could
		// run: the same error as if the loop had given up first.
		err = timeoutError(op, x.cfg.OperationTimeout)
	}
	return err
}

// timeoutError is the error of an attempt that ran past OperationTimeout.
func timeoutError(op Op, after time.Duration) error {
	return fmt.Errorf("%w after %s: %s", ErrTimeout, after, op)
}

// safeErr returns err if its message and chain can be read without
// panicking; a typed nil pointer in an error interface, the usual
// offender, becomes an error wrapping ErrPanic, so one bad error value
// fails its object instead of the agent.
func safeErr(op Op, err error) (out error) {
	if err == nil {
		return nil
	}
	defer func() {
		if p := recover(); p != nil {
			out = fmt.Errorf("%w: %s returned an error that panics when read (%T): %v", ErrPanic, op, err, p)
		}
	}()
	_ = err.Error()
	_, _ = retryAfter(err)
	_ = IsPermanent(err)
	_ = errors.Is(err, ErrPanic)
	return err
}

// syncRun is one Sync: its snapshot, the rows it covers, its result.
type syncRun[Obj any] struct {
	txn   statedb.ReadTxn
	id    uint64          // the attempt id of its rows
	taken []*request[Obj] // the rows taken; those still carrying id are its
	// all is set when no Sync has succeeded yet in this run: the changes
	// are every object of the snapshot, and the deletes read since.
	all      bool
	changes  []Change[Obj]
	full     bool // asked for by a full reconciliation
	failures int  // Syncs in a row that failed as a whole before this one
	start    time.Time
	// settled is set once the loop recorded its outcome: at its deadline
	// (OperationTimeout), its result when it returns is discarded.
	settled bool
	err     error // set by the Sync's goroutine
	dur     time.Duration
}

package reconciler

import (
	"context"
	"iter"
	"time"

	"github.com/cilium/statedb"
)

// runTask runs one task on a worker and returns its results: one per
// object, or one for a prune. It reads only the task and the Config.
func (l *loop[Obj]) runTask(ctx context.Context, t *task[Obj], overrun func(), out []result[Obj]) []result[Obj] {
	switch t.op {
	case OpUpdate, OpDelete:
		return append(out, l.runOne(ctx, t, overrun))
	case OpUpdateBatch, OpDeleteBatch:
		return append(out, l.runBatch(ctx, t, overrun)...)
	default: // OpPrune
		return append(out, l.runPrune(ctx, t, overrun))
	}
}

// runPrune runs a Prune like any other operation: under a claim, with
// Config.Ownership that of the whole set (Acquire(ctx, nil)), which it
// runs under and releases once it has returned. Without the claim this
// replica prunes nothing now: not a failure. It is given only the
// objects of the keys this replica owns.
func (l *loop[Obj]) runPrune(ctx context.Context, t *task[Obj], overrun func()) result[Obj] {
	res := result[Obj]{op: OpPrune, attempt: t.attempt}
	ctx, release, owned := l.claim(ctx, nil)
	if !owned {
		res.notOwned = true
		return res
	}
	defer release()
	start := time.Now()
	res.err = l.call(ctx, overrun, OpPrune, "", 0, func(ctx context.Context) error {
		return l.cfg.Operations.Prune(ctx, t.txn, l.ownedObjects(t))
	})
	res.dur = time.Since(start)
	l.metrics.Operation(OpPrune, l.classify(res.err, -1), l.cfg.Table.NumObjects(t.txn), res.dur)
	return res
}

// ownedObjects are the objects of a prune's snapshot whose keys this
// replica owns. A key is left out only if the model of outstanding work
// held it unowned when the prune was started (t.unowned, a copy) and
// Ownership.Owns still says so now, under the claim Acquire(ctx, nil) gave:
// a key gained in between (its slot may be in the claim now) is kept, and
// so is a key the model had not read yet, so that a Prune keeps rather
// than removes what it cannot place.
func (l *loop[Obj]) ownedObjects(t *task[Obj]) iter.Seq2[Obj, statedb.Revision] {
	all := l.cfg.Table.All(t.txn)
	if t.unowned == nil {
		return all
	}
	return func(yield func(Obj, statedb.Revision) bool) {
		for obj, rev := range all {
			key := l.keyOf(obj)
			if _, unowned := t.unowned[key]; unowned && !l.cfg.Ownership.Owns(keyBytes(key)) {
				continue
			}
			if !yield(obj, rev) {
				return
			}
		}
	}
}

// prepare clones an entry's object for its operation; a retry's clone
// carries the status that asked for the work.
func (l *loop[Obj]) prepare(en *opEntry[Obj]) (Obj, error) {
	target, err := l.clone(en.obj)
	if err == nil && en.asked != nil {
		target = l.cfg.SetObjectStatus(target, *en.asked)
	}
	return target, err
}

func (l *loop[Obj]) runOne(ctx context.Context, t *task[Obj], overrun func()) result[Obj] {
	en := &t.one
	res := result[Obj]{op: t.op, key: en.key, attempt: en.attempt, rev: en.rev}
	ctx, release, owned := l.claim(ctx, keyBytes(en.key))
	if !owned {
		res.notOwned = true // nothing ran
		return res
	}
	defer release() // once the operation has returned, timed out or not
	start := l.clock()
	res.err = l.call(ctx, overrun, t.op, en.key, en.failures, func(ctx context.Context) error {
		target, err := l.prepare(en)
		if err != nil {
			return err
		}
		res.target, res.cloned = target, true
		if t.op == OpUpdate {
			return l.cfg.Operations.Update(ctx, t.txn, en.rev, target)
		}
		return l.cfg.Operations.Delete(ctx, t.txn, en.rev, target)
	})
	l.metrics.Operation(t.op, l.classify(res.err, en.failures), 1, l.since(start))
	return res
}

func (l *loop[Obj]) runBatch(ctx context.Context, t *task[Obj], overrun func()) []result[Obj] {
	start := time.Now()
	results := make([]result[Obj], len(t.entries))
	batch := make([]BatchEntry[Obj], 0, len(t.entries))
	in := make([]int, 0, len(t.entries)) // results[in[i]] is batch[i]'s
	for i, en := range t.entries {
		results[i] = result[Obj]{op: t.op, key: en.key, attempt: en.attempt, rev: en.rev}
	}
	err := l.call(ctx, overrun, t.op, "", 0, func(ctx context.Context) error {
		for i := range t.entries {
			en := &t.entries[i]
			target, err := l.prepare(en)
			if err != nil {
				results[i].err = err
				continue
			}
			results[i].target, results[i].cloned = target, true
			batch = append(batch, BatchEntry[Obj]{Object: target, Revision: en.rev})
			in = append(in, i)
		}
		if t.op == OpUpdateBatch {
			l.cfg.BatchOperations.UpdateBatch(ctx, t.txn, batch)
		} else {
			l.cfg.BatchOperations.DeleteBatch(ctx, t.txn, batch)
		}
		return nil
	})
	for i, j := range in {
		results[j].target = batch[i].Object
		results[j].err = safeErr(t.op, batch[i].Result)
	}
	worst := ResultOK
	var counts [len(resultRank)]int
	for i := range results {
		if err != nil && results[i].err == nil {
			results[i].err = err // the whole batch panicked or timed out
		}
		res := l.classify(results[i].err, t.entries[i].failures)
		worst = worse(worst, res)
		counts[rankOf(res)]++
	}
	l.metrics.Operation(t.op, worst, 0, time.Since(start))
	for i, n := range counts {
		if n > 0 {
			l.metrics.BatchEntries(t.op, resultRank[i], n)
		}
	}
	return results
}

// clock and since time operations for the metrics, and cost nothing when
// the metrics are NopMetrics (two clock reads per object add up at a
// million objects).
func (l *loop[Obj]) clock() time.Time {
	if l.nopMetrics {
		return time.Time{}
	}
	return time.Now()
}

func (l *loop[Obj]) since(t time.Time) time.Duration {
	if l.nopMetrics {
		return 0
	}
	return time.Since(t)
}

// opEntry is one object of a task.
type opEntry[Obj any] struct {
	key      string
	obj      Obj
	rev      statedb.Revision
	attempt  uint64
	failures int
	// asked, when set, is written into the clone before Update: a
	// retry's object carries the status that asked for the work.
	asked *Status
}

// task is one unit of work for a worker: one object, a batch, or a prune.
type task[Obj any] struct {
	op Op
	// one is the entry of a single object's task; entries those of a
	// batch. Tasks are values in the executor's reused queue, so a single
	// object's task allocates nothing.
	one     opEntry[Obj]
	entries []opEntry[Obj]
	txn     statedb.ReadTxn
	attempt uint64 // a prune's attempt id
	// unowned is, for a prune with Config.Ownership, a copy of the keys
	// the model holds as another replica's: the prune is not given them.
	unowned map[string]statedb.Revision
}

// result is what became of one object's attempt (or of a prune).
type result[Obj any] struct {
	op      Op
	key     string
	attempt uint64
	rev     statedb.Revision // the revision the operation saw
	target  Obj              // the clone the operation was given
	cloned  bool
	// notOwned: the key (for a prune, the whole set) was not owned when
	// the worker came to start the operation (Config.Ownership); nothing
	// ran.
	notOwned bool
	err      error
	// overdue marks the result the executor posts when an attempt passes
	// OperationTimeout: the attempt counts as failed from then on, though
	// it may still run; its own result, when it comes, is not wanted.
	overdue bool
	dur     time.Duration
}

// overdue is what an attempt of t counts as once it ran past its
// deadline: failed, though it may still run. Its own result, when it
// comes, is not wanted.
func overdue[Obj any](t *task[Obj]) []result[Obj] {
	out := make([]result[Obj], 0, max(len(t.entries), 1))
	switch t.op {
	case OpPrune:
		out = append(out, result[Obj]{op: t.op, attempt: t.attempt, overdue: true})
	case OpUpdate, OpDelete:
		out = append(out, result[Obj]{op: t.op, key: t.one.key, attempt: t.one.attempt, rev: t.one.rev, overdue: true})
	}
	for _, en := range t.entries {
		out = append(out, result[Obj]{op: t.op, key: en.key, attempt: en.attempt, rev: en.rev, overdue: true})
	}
	return out
}

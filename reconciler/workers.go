package reconciler

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/cilium/statedb"
)

// commitDelay is how long finished results may wait for the rest of their
// round before they are committed anyway, so that one slow or hung
// operation does not hold back the statuses of the others.
const commitDelay = 10 * time.Millisecond

// task is one unit of work for a worker: one object, a batch, or a prune.
type task[Obj any] struct {
	op    Op
	one   *item[Obj]   // OpUpdate, OpDelete
	batch []*item[Obj] // OpUpdateBatch, OpDeleteBatch
	txn   statedb.ReadTxn

	// Set by the worker for prunes.
	err error
	dur time.Duration
}

// resultBox hands finished tasks from the workers to the loop.
type resultBox[Obj any] struct {
	mu      sync.Mutex
	done    []task[Obj]
	running int       // tasks handed out and not yet finished
	firstAt time.Time // when the oldest uncollected task finished

	// notify wakes the loop; capacity one, sent to without blocking.
	notify chan struct{}
}

func newResultBox[Obj any]() *resultBox[Obj] {
	return &resultBox[Obj]{notify: make(chan struct{}, 1)}
}

// finish is called by a worker. It wakes the loop only when the loop has
// something to do: the first result to arm the commit timer, and the last
// running task or commitAt results (a round's worth) to commit now.
func (rb *resultBox[Obj]) finish(t task[Obj], commitAt int) {
	rb.mu.Lock()
	rb.done = append(rb.done, t)
	rb.running--
	if len(rb.done) == 1 {
		rb.firstAt = time.Now()
	}
	wake := len(rb.done) == 1 || rb.running == 0 || len(rb.done) >= commitAt
	rb.mu.Unlock()
	if wake {
		select {
		case rb.notify <- struct{}{}:
		default:
		}
	}
}

// shouldCommit reports whether the loop should commit now; when results
// wait but not for long enough, it arms the commit timer instead.
func (rb *resultBox[Obj]) shouldCommit(now time.Time, commitAt int, ts *loopTimers) bool {
	rb.mu.Lock()
	n, running, firstAt := len(rb.done), rb.running, rb.firstAt
	rb.mu.Unlock()
	if n == 0 {
		return false
	}
	if running == 0 || n >= commitAt || now.Sub(firstAt) >= commitDelay {
		ts.commit.disarm()
		return true
	}
	ts.commit.arm(commitDelay - now.Sub(firstAt))
	return false
}

// take returns the finished tasks and empties the box.
func (rb *resultBox[Obj]) take(buf []task[Obj]) []task[Obj] {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	buf = append(buf[:0], rb.done...)
	clear(rb.done)
	rb.done = rb.done[:0]
	return buf
}

func (rb *resultBox[Obj]) started(n int) {
	rb.mu.Lock()
	rb.running += n
	rb.mu.Unlock()
}

func (rb *resultBox[Obj]) inFlight() int {
	rb.mu.Lock()
	defer rb.mu.Unlock()
	return rb.running
}

// dispatch hands the ready items to the workers: one task per item, or with
// BatchOperations one batch of updates and one of deletes.
func (l *loop[Obj]) dispatch() {
	if len(l.ready) == 0 || l.full.draining() || l.suspended() {
		return
	}
	txn := l.roundTxn
	if l.cfg.BatchOperations != nil {
		var updates, deletes []*item[Obj]
		for _, it := range l.ready {
			if it.deleted {
				deletes = append(deletes, it)
			} else {
				updates = append(updates, it)
			}
		}
		l.results.started(min(len(updates), 1) + min(len(deletes), 1))
		if len(updates) > 0 {
			l.submit(task[Obj]{op: OpUpdateBatch, batch: updates, txn: txn})
		}
		if len(deletes) > 0 {
			l.submit(task[Obj]{op: OpDeleteBatch, batch: deletes, txn: txn})
		}
	} else {
		l.results.started(len(l.ready))
		for _, it := range l.ready {
			op := OpUpdate
			if it.deleted {
				op = OpDelete
			}
			l.submit(task[Obj]{op: op, one: it, txn: txn})
		}
	}
	clear(l.ready)
	l.ready = l.ready[:0]
}

// submit hands a task (already counted with results.started) to a worker,
// or runs it right here in inline mode.
func (l *loop[Obj]) submit(t task[Obj]) {
	if l.inline {
		if l.ctx.Err() != nil {
			return // stopping: start nothing new (nothing is committed either)
		}
		var w workerState
		l.runTask(l.ctx, &w, &t)
		l.results.finish(t, l.cfg.RoundSize)
		return
	}
	// Never blocks: the channel holds RoundSize+2 tasks and at most
	// RoundSize objects are busy at once.
	l.work <- t
}

// worker runs tasks until the loop closes the work channel.
//
// A worker whose operation runs past OperationTimeout without returning
// (it ignores its context) hands its place to a new worker, so the others
// keep flowing even with Concurrency 1; it finishes its operation, reports
// the result and exits. At most Concurrency workers are abandoned like
// this at once; beyond that a stuck operation keeps its place.
func (l *loop[Obj]) worker(ctx context.Context) {
	defer l.wg.Done()
	for t := range l.work {
		if ctx.Err() != nil {
			continue // stopping: start nothing new
		}
		var w workerState
		l.runTask(ctx, &w, &t)
		if w.handedOff {
			// Before the result wakes the loop: a full reconciliation
			// postponed for this stuck operation looks at the count.
			l.abandoned.Add(-1)
		}
		l.results.finish(t, l.cfg.RoundSize)
		if w.handedOff {
			return
		}
	}
}

// overrunner is told when an operation runs past its deadline: the
// per-object loop hands the worker's place over, the whole-set loop
// reports the Sync as overdue.
type overrunner interface {
	overrun(parent context.Context, w *workerState)
}

// workerState tells a worker whether it gave its place away.
type workerState struct {
	handedOff bool
}

// overrun is called when an operation's deadline passed: if the operation
// has not returned, a new worker takes this one's place.
func (l *loop[Obj]) overrun(ctx context.Context, w *workerState) {
	if ctx.Err() != nil {
		return // stopping, not overrunning
	}
	if l.abandoned.Add(1) > int32(l.cfg.Concurrency) {
		l.abandoned.Add(-1)
		return
	}
	w.handedOff = true
	l.wg.Add(1)
	go l.worker(ctx)
	// Wake the loop: a full reconciliation waiting for in-flight work
	// may now have only stuck operations left to wait for.
	select {
	case l.results.notify <- struct{}{}:
	default:
	}
}

func (l *loop[Obj]) runTask(ctx context.Context, w *workerState, t *task[Obj]) {
	ops := l.cfg.Operations
	switch t.op {
	case OpUpdate, OpDelete:
		it := t.one
		start := l.clock()
		it.err = l.call(ctx, l, w, t.op, it.key, it.failures, func(ctx context.Context) error {
			target, err := l.clone(it.obj)
			if err != nil {
				return err
			}
			it.target, it.cloned = target, true
			if t.op == OpUpdate {
				return ops.Update(ctx, t.txn, it.rev, it.target)
			}
			return ops.Delete(ctx, t.txn, it.rev, it.target)
		})
		it.result = l.classify(it.err, it.failures)
		l.metrics.Operation(t.op, it.result, 1, l.since(start))

	case OpUpdateBatch, OpDeleteBatch:
		bops := l.cfg.BatchOperations
		start := time.Now()
		entries := make([]BatchEntry[Obj], 0, len(t.batch))
		in := make([]*item[Obj], 0, len(t.batch)) // the items in entries
		err := l.call(ctx, l, w, t.op, "", 0, func(ctx context.Context) error {
			for _, it := range t.batch {
				target, err := l.clone(it.obj)
				if err != nil {
					it.err = err
					continue
				}
				it.target, it.cloned = target, true
				entries = append(entries, BatchEntry[Obj]{Object: target, Revision: it.rev})
				in = append(in, it)
			}
			if t.op == OpUpdateBatch {
				bops.UpdateBatch(ctx, t.txn, entries)
			} else {
				bops.DeleteBatch(ctx, t.txn, entries)
			}
			return nil
		})
		for i, it := range in {
			it.target = entries[i].Object
			it.err = safeErr(t.op, entries[i].Result)
		}
		worst := ResultOK
		var counts [len(resultRank)]int
		for _, it := range t.batch {
			if err != nil && it.err == nil {
				// The whole batch panicked or timed out.
				it.err = err
			}
			it.result = l.classify(it.err, it.failures)
			worst = worse(worst, it.result)
			counts[rankOf(it.result)]++
		}
		l.metrics.Operation(t.op, worst, 0, time.Since(start))
		for i, n := range counts {
			if n > 0 {
				l.metrics.BatchEntries(t.op, resultRank[i], n)
			}
		}

	case OpPrune:
		start := time.Now()
		t.err = l.call(ctx, l, w, OpPrune, "", 0, func(ctx context.Context) error {
			return ops.Prune(ctx, t.txn, l.cfg.Table.All(t.txn))
		})
		t.dur = time.Since(start)
		l.metrics.Operation(OpPrune, l.classify(t.err, -1), l.cfg.Table.NumObjects(t.txn), t.dur)
	}
}

// call runs one operation with the operation timeout and turns a panic into
// an error wrapping ErrPanic. The stack is logged when a key first panics
// (failures == 0), not on every retry.
func (r *reconciler[Obj]) call(ctx context.Context, or overrunner, w *workerState, op Op, key string, failures int, fn func(context.Context) error) (err error) {
	if r.cfg.OperationTimeout > 0 {
		parent := ctx
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.cfg.OperationTimeout)
		defer cancel()
		decided := make(chan struct{})
		stop := context.AfterFunc(ctx, func() {
			defer close(decided)
			or.overrun(parent, w)
		})
		defer func() {
			if !stop() {
				<-decided // overrun ran (or runs): let it finish deciding
			}
		}()
	}
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %s: %v", ErrPanic, op, p)
			if failures == 0 {
				r.log.Error("Operation panicked; recovered, the object will be retried",
					"op", op, "key", key, "panic", p, "stack", string(debug.Stack()))
			}
		}
	}()
	err = safeErr(op, fn(ctx))
	if err != nil && r.cfg.OperationTimeout > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w after %s: %s: %w", ErrTimeout, r.cfg.OperationTimeout, op, err)
	}
	return err
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

// safeErr returns err if it can be used safely: its message and its chain
// of wrapped errors can be read without panicking. A typed nil pointer in an
// error interface is the usual offender; it becomes an error wrapping
// ErrPanic, so one bad error value fails its object instead of the agent.
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

// clone copies obj for an operation. A CloneObject that returns the object
// itself (for pointer types) would let the operation and the status write
// mutate an object the table's snapshots share: refuse it.
func (r *reconciler[Obj]) clone(obj Obj) (Obj, error) {
	c := r.cfg.CloneObject(obj)
	if r.pointerObjects && c == obj {
		var zero Obj
		return zero, fmt.Errorf("%w: Config.CloneObject returned the object itself; it must return a copy", ErrInvalidConfig)
	}
	return c, nil
}

// classify maps an operation's error to its metrics result. failures is
// the object's consecutive failures before this attempt, or -1 for a prune,
// which has no retry budget.
func (r *reconciler[Obj]) classify(err error, failures int) Result {
	switch {
	case err == nil:
		return ResultOK
	case errors.Is(err, ErrInvalidConfig):
		return ResultPermanent
	case isDeferral(err):
		return ResultDeferred
	case errors.Is(err, ErrPanic):
		return ResultPanic
	case IsPermanent(err):
		return ResultPermanent
	case r.cfg.MaxRetries > 0 && failures >= 0 && failures+1 >= r.cfg.MaxRetries:
		return ResultExhausted
	case errors.Is(err, ErrTimeout):
		return ResultTimeout
	default:
		return ResultError
	}
}

// resultRank orders results from best to worst, for reporting a batch by
// its worst entry.
var resultRank = [...]Result{ResultOK, ResultDeferred, ResultError, ResultTimeout, ResultPermanent, ResultExhausted, ResultPanic}

func rankOf(r Result) int {
	for i, x := range resultRank {
		if x == r {
			return i
		}
	}
	return len(resultRank) - 1
}

// worse returns the worse of two results.
func worse(a, b Result) Result {
	if rankOf(b) > rankOf(a) {
		return b
	}
	return a
}

package reconciler

import (
	"context"
	"sync"
	"time"

	"github.com/cilium/statedb"
)

// The executor runs operations for the per-object loop on a pool of at
// most Concurrency workers, started as work comes. It owns no request: a
// worker is handed values (a task) and hands values back (results), so
// the only state shared with the loop is the queue and the result box
// below, each behind the executor's mutex.

// commitDelay is how long finished results may wait for the rest of their
// round before they are committed anyway, so that one slow operation does
// not hold back the statuses of the others.
const commitDelay = 10 * time.Millisecond

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

// executor is the worker pool and its two queues.
type executor[Obj any] struct {
	mu   sync.Mutex
	cond sync.Cond
	// tasks waiting for a worker, FIFO from head.
	queue []task[Obj]
	head  int
	// results not yet taken by the loop, and when the oldest came.
	done    []result[Obj]
	firstAt time.Time
	// running counts the tasks handed out that have not returned.
	running int
	// submitted and started count the tasks queued and taken by a
	// worker: a task whose sequence number (submit's) is at or past
	// started still waits for a worker (Explain says so).
	submitted, started uint64

	workers   int // in the pool (abandoned ones not counted)
	idle      int
	max       int
	abandoned int // workers that left the pool while stuck past a deadline
	closed    bool

	notify chan struct{} // wakes the loop; capacity one
	wg     sync.WaitGroup
	// commitAt is how many results make a round's worth: the loop is
	// woken for them at once.
	commitAt int
	// hungry is set by the loop while more work waits than a round had
	// room for: then a worker with nothing to do is a reason to commit
	// what is done, which makes room for the next round's work. Without
	// it, a round of slow operations ends with most workers idle while
	// its last few run.
	hungry bool
	run    func(ctx context.Context, t *task[Obj], overrun func(), out []result[Obj]) []result[Obj]
}

func newExecutor[Obj any](max, commitAt int, run func(context.Context, *task[Obj], func(), []result[Obj]) []result[Obj]) *executor[Obj] {
	e := &executor[Obj]{max: max, commitAt: commitAt, notify: make(chan struct{}, 1), run: run}
	e.cond.L = &e.mu
	return e
}

// submit queues tasks, starting workers while there are fewer idle ones
// than tasks and the pool is below its size. Workers are started and
// woken after the mutex is released: each goes straight for it.
func (e *executor[Obj]) submit(ctx context.Context, tasks ...task[Obj]) (seq uint64) {
	if len(tasks) == 0 {
		return 0
	}
	e.mu.Lock()
	seq = e.submitted
	e.submitted += uint64(len(tasks))
	if e.head > 0 && e.head >= len(e.queue)/2 {
		// Refilled before it ran dry (the loop tops the queue up while
		// workers run): move the rest down rather than grow forever.
		n := copy(e.queue, e.queue[e.head:])
		clear(e.queue[n:])
		e.queue, e.head = e.queue[:n], 0
	}
	e.queue = append(e.queue, tasks...)
	e.running += len(tasks)
	start := 0
	for n := len(e.queue) - e.head - e.idle; n > 0 && e.workers < e.max; n-- {
		e.workers++
		start++
	}
	e.wg.Add(start)
	wake := min(len(tasks), e.idle)
	e.mu.Unlock()
	for range start {
		go e.worker(ctx)
	}
	for range wake {
		e.cond.Signal()
	}
	return seq
}

// executing counts the tasks a worker runs now.
func (e *executor[Obj]) executing() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running - (len(e.queue) - e.head)
}

// waitsForWorker reports whether the task of sequence number seq is
// still queued.
func (e *executor[Obj]) waitsForWorker(seq uint64) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return seq >= e.started && !e.closed
}

// worker runs tasks until the executor is closed. It holds the mutex
// once per task: to hand back one task's results and take the next.
func (e *executor[Obj]) worker(ctx context.Context) {
	defer e.wg.Done()
	var (
		buf       []result[Obj]
		t         task[Obj]
		handedOff bool
	)
	// One callback for the worker's life, not one per task: overrun is
	// called (if at all) before run returns, on the timer's goroutine.
	overrun := func() { handedOff = e.overrun(ctx, &t) }
	e.mu.Lock()
	for {
		for e.head == len(e.queue) && !e.closed {
			e.idle++
			e.cond.Wait()
			e.idle--
		}
		if e.closed {
			e.workers--
			e.mu.Unlock()
			return
		}
		t = e.queue[e.head]
		e.started++
		e.queue[e.head] = task[Obj]{}
		if e.head++; e.head == len(e.queue) {
			e.queue, e.head = e.queue[:0], 0
		}
		e.mu.Unlock()

		handedOff = false
		if ctx.Err() == nil { // stopping: start nothing new
			buf = e.run(ctx, &t, overrun, buf[:0])
		}
		t = task[Obj]{}

		e.mu.Lock()
		e.finish(buf, handedOff)
		clear(buf)
		buf = buf[:0]
		if handedOff {
			e.mu.Unlock()
			return
		}
	}
}

// overrun is called when t's deadline passed and its operation has not
// returned: the attempt is reported as failed now, and the worker leaves
// the pool so that another can take its place (at most Concurrency stuck
// workers at once; beyond that a stuck one keeps its place). It reports
// whether the worker left.
func (e *executor[Obj]) overrun(ctx context.Context, t *task[Obj]) bool {
	if ctx.Err() != nil {
		return false // stopping, not overrunning
	}
	overdue := make([]result[Obj], 0, max(len(t.entries), 1))
	switch t.op {
	case OpPrune:
		overdue = append(overdue, result[Obj]{op: t.op, attempt: t.attempt, overdue: true})
	case OpUpdate, OpDelete:
		overdue = append(overdue, result[Obj]{op: t.op, key: t.one.key, attempt: t.one.attempt, rev: t.one.rev, overdue: true})
	}
	for _, en := range t.entries {
		overdue = append(overdue, result[Obj]{op: t.op, key: en.key, attempt: en.attempt, rev: en.rev, overdue: true})
	}
	e.mu.Lock()
	left := e.abandoned < e.max
	if left {
		e.abandoned++
		e.workers--
		if len(e.queue)-e.head > e.idle {
			e.workers++
			e.wg.Add(1)
			go e.worker(ctx)
		}
	}
	e.post(overdue, true)
	e.mu.Unlock()
	return left
}

// finish hands a task's results to the loop. Called with mu held.
func (e *executor[Obj]) finish(results []result[Obj], handedOff bool) {
	e.running--
	if handedOff {
		e.abandoned--
	}
	e.post(results, false)
}

// post adds results and wakes the loop when it has something to do: the
// first result (to arm the commit timer), the last running task, a
// round's worth, a worker left idle while the loop has more work, or
// (urgent) an overdue attempt to report. Waking it for
// every result would have it report a thousand times a round. Called
// with mu held.
func (e *executor[Obj]) post(results []result[Obj], urgent bool) {
	first := len(e.done) == 0
	if first {
		e.firstAt = time.Now()
	}
	e.done = append(e.done, results...)
	if urgent || first || e.running-e.abandoned <= 0 || len(e.done) >= e.commitAt || e.starving() {
		select {
		case e.notify <- struct{}{}:
		default:
		}
	}
}

// shouldCommit reports whether the loop should take the results now; when
// some wait but not for long enough, it returns how long to wait.
func (e *executor[Obj]) shouldCommit(now time.Time, commitAt int) (bool, time.Duration) {
	e.mu.Lock()
	n, running, firstAt, starving := len(e.done), e.running-e.abandoned, e.firstAt, e.starving()
	e.mu.Unlock()
	switch {
	case n == 0:
		return false, 0
	case running <= 0 || n >= commitAt || starving || now.Sub(firstAt) >= commitDelay:
		return true, 0
	}
	return false, commitDelay - now.Sub(firstAt)
}

// starving reports whether the workers are about to run out of work
// (fewer tasks queued than there are workers) while the loop has more
// waiting. Called with mu held.
func (e *executor[Obj]) starving() bool {
	return e.hungry && len(e.queue)-e.head < e.max
}

// setHungry records whether the loop has more work waiting than it could
// take.
func (e *executor[Obj]) setHungry(h bool) {
	e.mu.Lock()
	e.hungry = h
	e.mu.Unlock()
}

// take returns the finished results and empties the box.
func (e *executor[Obj]) take(buf []result[Obj]) []result[Obj] {
	e.mu.Lock()
	defer e.mu.Unlock()
	buf = append(buf[:0], e.done...)
	clear(e.done)
	e.done = e.done[:0]
	return buf
}

// close stops the workers once they return; tasks not started are
// dropped. It waits for every worker, abandoned ones included.
func (e *executor[Obj]) close() {
	e.mu.Lock()
	e.closed = true
	e.queue, e.head = nil, 0
	e.cond.Broadcast()
	e.mu.Unlock()
	e.wg.Wait()
}

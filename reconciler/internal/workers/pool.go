// Package workers is the reconciler's pool of workers: at most a fixed
// number of goroutines, started as work comes, that run tasks handed to
// them in order and hand results back through a mutex-held box. A task
// that runs past its deadline (the caller's run reports it through
// overrun) hands its worker's place to a new worker, at most the pool's
// size of them at once, so that a hung operation holds up only itself.
package workers

import (
	"context"
	"slices"
	"sync"
	"time"
)

// CommitDelay is how long finished results may wait for the rest of their
// round before they are taken anyway, so that one slow operation does not
// hold back the statuses of the others.
const CommitDelay = 10 * time.Millisecond

// Pool is the worker pool and its two queues: tasks T in, results R out.
type Pool[T, R any] struct {
	mu   sync.Mutex
	cond sync.Cond
	// tasks waiting for a worker, FIFO from head.
	queue []T
	head  int
	// results not yet taken by the owner, and when the oldest came.
	done    []R
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
	spawned   int // workers ever started: the last one's ID
	closed    bool

	notify chan struct{} // wakes the owner; capacity one
	// all are the worker goroutines, abandoned ones included, each with
	// the task it runs (if any) and since when; gone is closed when,
	// closed, the last has returned.
	all  []*worker[T]
	gone chan struct{}
	// commitAt is how many results make a round's worth: the owner is
	// woken for them at once.
	commitAt int
	// hungry is set by the owner while more work waits than a round had
	// room for: then a worker with nothing to do is a reason to commit
	// what is done, which makes room for the next round's work. Without
	// it, a round of slow operations ends with most workers idle while
	// its last few run.
	hungry bool
	// lowWater is how few queued tasks make a hungry pool wake its owner
	// (starving): the pool's size unless the owner set another.
	lowWater int
	// eager has ShouldCommit take any result at once: the owner batches
	// by itself, committing only while no write of its is out.
	eager   bool
	run     func(ctx context.Context, t *T, overrun func(), out []R) []R
	overdue func(*T) []R
}

// New returns a pool of at most max workers. run runs one task and
// appends its results to out; it calls overrun (on another goroutine,
// before it returns) when the task passed its deadline while still
// running. overdue returns the results a task counts as when it overran:
// they are handed back at once, the task's own when it returns. commitAt
// is how many results make a batch worth waking the owner for at once.
func New[T, R any](max, commitAt int, run func(ctx context.Context, t *T, overrun func(), out []R) []R, overdue func(*T) []R) *Pool[T, R] {
	e := &Pool[T, R]{max: max, lowWater: max, commitAt: commitAt, notify: make(chan struct{}, 1), run: run, overdue: overdue,
		gone: make(chan struct{})}
	e.cond.L = &e.mu
	return e
}

// Submit queues tasks, starting workers while there are fewer idle ones
// than tasks and the pool is below its size. Workers are started and
// woken after the mutex is released: each goes straight for it.
func (e *Pool[T, R]) Submit(ctx context.Context, tasks ...T) (seq uint64) {
	if len(tasks) == 0 {
		return 0
	}
	e.mu.Lock()
	seq = e.submitted
	e.submitted += uint64(len(tasks))
	if e.head > 0 && e.head >= len(e.queue)/2 {
		// Refilled before it ran dry (the owner tops the queue up while
		// workers run): move the rest down rather than grow forever.
		n := copy(e.queue, e.queue[e.head:])
		clear(e.queue[n:])
		e.queue, e.head = e.queue[:n], 0
	}
	e.queue = append(e.queue, tasks...)
	e.running += len(tasks)
	var start []*worker[T]
	for n := len(e.queue) - e.head - e.idle; n > 0 && e.workers < e.max; n-- {
		start = append(start, e.spawn())
	}
	wake := min(len(tasks), e.idle)
	e.mu.Unlock()
	for _, w := range start {
		go e.worker(ctx, w)
	}
	for range wake {
		e.cond.Signal()
	}
	return seq
}

// Executing counts the tasks that run now or start without waiting for
// another to return: those handed in and not returned, up to the pool's
// size, less those abandoned past their deadline (Stuck). A task queued
// behind busy workers is not counted; one handed to a worker that is idle
// or starting is, though the worker has not taken it yet: the owner
// reports what runs right after it hands tasks in, and may then sleep
// until one returns, which a hung task never does.
func (e *Pool[T, R]) Executing() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.busy() + e.free()
}

// busy counts the tasks workers have taken and not returned, less those
// abandoned. Called with mu held.
func (e *Pool[T, R]) busy() int {
	return e.running - (len(e.queue) - e.head) - e.abandoned
}

// free counts the queued tasks that a worker takes without waiting for
// another task to return: the first free() of the queue. Called with mu
// held.
func (e *Pool[T, R]) free() int {
	return min(len(e.queue)-e.head, max(0, e.max-e.busy()))
}

// Stuck counts the tasks that ran past their deadline and still run,
// their workers having left the pool.
func (e *Pool[T, R]) Stuck() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.abandoned
}

// Outstanding counts the tasks handed in that have not returned, queued
// or running, less those whose workers left the pool stuck past their
// deadline: what holds the pool's places.
func (e *Pool[T, R]) Outstanding() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.running - e.abandoned
}

// SetOrdered has the owner hand out tasks a few at a time, in an order of
// its own: a hungry pool wakes it when fewer than lowWater tasks are
// queued, and it takes every result at once (ShouldCommit).
func (e *Pool[T, R]) SetOrdered(lowWater int) {
	e.mu.Lock()
	e.lowWater, e.eager = lowWater, true
	e.mu.Unlock()
}

// TaskState is where a task handed to the pool stands.
type TaskState uint8

const (
	TaskQueued   TaskState = iota // waits for a worker to return another task
	TaskRunning                   // a worker runs it, or an idle one takes it next
	TaskReturned                  // it returned (or, closed, was dropped)
)

// Task says where the task of sequence number seq stands, and, running,
// since when: the zero time while the worker that takes it next has not
// yet (it counts as running as Executing does).
func (e *Pool[T, R]) Task(seq uint64) (TaskState, time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if seq >= e.started {
		switch {
		case e.closed:
			return TaskReturned, time.Time{}
		case seq-e.started < uint64(e.free()):
			return TaskRunning, time.Time{}
		}
		return TaskQueued, time.Time{}
	}
	for _, w := range e.all {
		if w.busy && w.seq == seq {
			return TaskRunning, w.at
		}
	}
	return TaskReturned, time.Time{}
}

// worker is one worker goroutine's state, as the pool sees it while it
// runs a task: which (seq, task) and since when.
type worker[T any] struct {
	task T
	seq  uint64
	at   time.Time
	busy bool
	idx  int // in Pool.all
	id   int // the worker's number, for observers (ID)
}

// worker runs tasks until the pool is closed. It holds the mutex
// once per task: to hand back one task's results and take the next.
func (e *Pool[T, R]) worker(ctx context.Context, w *worker[T]) {
	var (
		buf       []R
		handedOff bool
	)
	// One callback for the worker's life, not one per task: overrun is
	// called (if at all) before run returns, on the timer's goroutine.
	overrun := func() { handedOff = e.overrun(ctx, &w.task) }
	ctx = context.WithValue(ctx, workerKey{}, w.id) // once per worker, not per task
	e.mu.Lock()
	defer e.leave(w)
	for {
		for e.head == len(e.queue) && !e.closed {
			e.idle++
			e.cond.Wait()
			e.idle--
		}
		if e.closed {
			e.workers--
			return
		}
		var zero T
		w.task, w.seq, w.at, w.busy = e.queue[e.head], e.started, time.Now(), true
		e.started++
		e.queue[e.head] = zero
		if e.head++; e.head == len(e.queue) {
			e.queue, e.head = e.queue[:0], 0
		}
		e.mu.Unlock()

		handedOff = false
		if ctx.Err() == nil { // stopping: start nothing new
			buf = e.run(ctx, &w.task, overrun, buf[:0])
		}

		e.mu.Lock()
		w.task, w.busy = zero, false // under the mutex: Close may be reading it
		e.finish(buf, handedOff)
		clear(buf)
		buf = buf[:0]
		if handedOff {
			return
		}
	}
}

// spawn makes a worker of the pool, to be started as a goroutine. Called
// with mu held.
func (e *Pool[T, R]) spawn() *worker[T] {
	e.workers++
	e.spawned++
	w := &worker[T]{idx: len(e.all), id: e.spawned}
	e.all = append(e.all, w)
	return w
}

// leave records, with the mutex held, that w's goroutine returns, and
// releases the mutex.
func (e *Pool[T, R]) leave(w *worker[T]) {
	last := len(e.all) - 1
	e.all[w.idx], e.all[last].idx = e.all[last], w.idx
	e.all[last] = nil
	e.all = e.all[:last]
	if len(e.all) == 0 && e.closed {
		close(e.gone)
	}
	e.mu.Unlock()
}

// overrun is called when t's deadline passed and its operation has not
// returned: the attempt is reported as failed now, and the worker leaves
// the pool so that another can take its place (at most the pool's size of stuck
// workers at once; beyond that a stuck one keeps its place). It reports
// whether the worker left.
func (e *Pool[T, R]) overrun(ctx context.Context, t *T) bool {
	if ctx.Err() != nil {
		return false // stopping, not overrunning
	}
	overdue := e.overdue(t)
	e.mu.Lock()
	left := e.abandoned < e.max
	if left {
		e.abandoned++
		e.workers--
		if len(e.queue)-e.head > e.idle && !e.closed {
			go e.worker(ctx, e.spawn())
		}
	}
	e.post(overdue, true)
	e.mu.Unlock()
	return left
}

// finish hands a task's results to the owner. Called with mu held.
func (e *Pool[T, R]) finish(results []R, handedOff bool) {
	e.running--
	if handedOff {
		e.abandoned--
	}
	e.post(results, false)
}

// post adds results and wakes the owner when it has something to do: the
// first result (to arm the commit timer), the last running task, a
// round's worth, a worker left idle while the owner has more work, or
// (urgent) an overdue attempt to report. Waking it for
// every result would have it report a thousand times a round. Called
// with mu held.
func (e *Pool[T, R]) post(results []R, urgent bool) {
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

// ShouldCommit reports whether the owner should take the results now; when
// some wait but not for long enough, it returns how long to wait.
func (e *Pool[T, R]) ShouldCommit(now time.Time, commitAt int) (bool, time.Duration) {
	e.mu.Lock()
	n, running, firstAt, starving, eager := len(e.done), e.running-e.abandoned, e.firstAt, e.starving(), e.eager
	e.mu.Unlock()
	switch {
	case n == 0:
		return false, 0
	case eager || running <= 0 || n >= commitAt || starving || now.Sub(firstAt) >= CommitDelay:
		return true, 0
	}
	return false, CommitDelay - now.Sub(firstAt)
}

// starving reports whether the workers are about to run out of work
// (fewer tasks queued than there are workers) while the owner has more
// waiting. Called with mu held.
func (e *Pool[T, R]) starving() bool {
	return e.hungry && len(e.queue)-e.head < e.lowWater
}

// SetHungry records whether the owner has more work waiting than it could
// take.
func (e *Pool[T, R]) SetHungry(h bool) {
	e.mu.Lock()
	e.hungry = h
	e.mu.Unlock()
}

// Take returns the finished results and empties the box.
func (e *Pool[T, R]) Take(buf []R) []R {
	e.mu.Lock()
	defer e.mu.Unlock()
	buf = append(buf[:0], e.done...)
	clear(e.done)
	e.done = e.done[:0]
	return buf
}

// Close stops the workers once they return; tasks not started are
// dropped. Wait waits for them.
func (e *Pool[T, R]) Close() {
	e.mu.Lock()
	if !e.closed && len(e.all) == 0 {
		close(e.gone) // else the last worker to return closes it
	}
	e.closed = true
	e.queue, e.head = nil, 0
	e.cond.Broadcast()
	e.mu.Unlock()
}

// Wait waits, once the pool is closed, for every worker to return,
// abandoned ones included, until wait ends: then it returns what
// describe says of each task still running (nil when none is).
func (e *Pool[T, R]) Wait(wait context.Context, describe func(t *T, running time.Duration) string) []string {
	select {
	case <-e.gone:
		return nil
	case <-wait.Done():
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var left []string
	for _, w := range e.all {
		if w.busy {
			left = append(left, describe(&w.task, time.Since(w.at)))
		}
	}
	slices.Sort(left)
	return left
}

// Notify is the channel that wakes the owner when it has results to take.
func (e *Pool[T, R]) Notify() <-chan struct{} { return e.notify }

// workerKey is the context key of a worker's ID.
type workerKey struct{}

// ID returns the number of the worker whose task ctx was handed to (from
// 1, in the order the pool started them), or 0 off a worker. Observers
// are told which worker ran an attempt.
func ID(ctx context.Context) int {
	id, _ := ctx.Value(workerKey{}).(int)
	return id
}

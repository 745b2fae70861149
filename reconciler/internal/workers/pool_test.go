package workers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// task is a test task: its id, and a channel it blocks on (nil: none).
type task struct {
	id    int
	block chan struct{}
	// overran is closed by the test's run when the pool's overrun
	// callback was made for the task; started (nil: none) when it starts.
	overran, started chan struct{}
}

// result is a test result: the task's id, overdue when the pool posted
// it for an overrun.
type result struct {
	id      int
	overdue bool
}

func newTestPool(max int) *Pool[task, result] {
	run := func(_ context.Context, t *task, overrun func(), out []result) []result {
		if t.started != nil {
			close(t.started)
		}
		if t.block != nil {
			if t.overran != nil {
				overrun()
				close(t.overran)
			}
			<-t.block
		}
		return append(out, result{id: t.id})
	}
	overdue := func(t *task) []result { return []result{{id: t.id, overdue: true}} }
	return New(max, 100, run, overdue)
}

// take waits until n results are in and returns them by id.
func take(t *testing.T, p *Pool[task, result], n int) []result {
	t.Helper()
	var got []result
	deadline := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case <-p.Notify():
			got = append(got, p.Take(nil)...)
		case <-deadline:
			t.Fatalf("%d results, want %d", len(got), n)
		}
	}
	slices.SortFunc(got, func(a, b result) int { return a.id - b.id })
	return got
}

// closeNow closes p, waiting for every worker.
func closeNow(p *Pool[task, result]) {
	p.Close()
	if left := p.Wait(context.Background(), describe); left != nil {
		panic(fmt.Sprint("Close without a bound gave up on ", left))
	}
}

func describe(t *task, running time.Duration) string {
	return fmt.Sprintf("task %d, %v", t.id, running)
}

// TestPoolRunsEveryTask: every task submitted runs once, with sequence
// numbers in submission order, on at most max workers.
func TestPoolRunsEveryTask(t *testing.T) {
	p := newTestPool(3)
	defer closeNow(p)
	var tasks []task
	for i := range 50 {
		tasks = append(tasks, task{id: i})
	}
	if seq := p.Submit(context.Background(), tasks[:20]...); seq != 0 {
		t.Fatalf("first sequence number %d, want 0", seq)
	}
	if seq := p.Submit(context.Background(), tasks[20:]...); seq != 20 {
		t.Fatalf("second sequence number %d, want 20", seq)
	}
	got := take(t, p, 50)
	for i, r := range got {
		if r.id != i || r.overdue {
			t.Fatalf("results %v, want each task once", got)
		}
	}
	if st, _ := p.Task(49); st != TaskReturned || p.Executing() != 0 {
		t.Fatal("a task still waits for a worker after all returned")
	}
}

// TestPoolReplacesOverrunWorker: a worker whose task overran leaves the
// pool (its overdue result posted at once) and a new worker takes the
// queue, so a hung task holds up only itself; Close waits for it.
func TestPoolReplacesOverrunWorker(t *testing.T) {
	p := newTestPool(1)
	hung := task{id: 0, block: make(chan struct{}), overran: make(chan struct{})}
	p.Submit(context.Background(), hung, task{id: 1}, task{id: 2})
	<-hung.overran
	got := take(t, p, 3)
	if !slices.Equal(got, []result{{id: 0, overdue: true}, {id: 1}, {id: 2}}) {
		t.Fatalf("results %v, want the overdue one and the two behind it", got)
	}
	var closed sync.WaitGroup
	closed.Add(1)
	go func() { defer closed.Done(); closeNow(p) }()
	close(hung.block) // Close returns only once the hung task has
	closed.Wait()
}

// TestPoolWaitsForWorker: with the one worker held, the next task waits.
func TestPoolWaitsForWorker(t *testing.T) {
	p := newTestPool(1)
	defer closeNow(p)
	held := task{id: 0, block: make(chan struct{})}
	p.Submit(context.Background(), held)
	seq := p.Submit(context.Background(), task{id: 1})
	if st, _ := p.Task(seq); st != TaskQueued {
		t.Fatal("the task behind a held worker does not wait for one")
	}
	close(held.block)
	take(t, p, 2)
	if st, _ := p.Task(seq); st != TaskReturned {
		t.Fatal("the task still waits after it ran")
	}
}

// TestPoolOrdered: an ordered pool's owner is woken while fewer than
// lowWater tasks are queued (not the pool's size), takes results as soon
// as they are in (not when a round's worth is), and counts as
// outstanding what is queued or running.
func TestPoolOrdered(t *testing.T) {
	for _, ordered := range []bool{false, true} {
		t.Run(fmt.Sprint("ordered=", ordered), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testPoolOrdered(t, ordered) })
		})
	}
}

// testPoolOrdered runs in a bubble: synctest.Wait tells when the results
// of the tasks that can finish are in. (The pool wakes its owner for the
// first result and not for each: waiting on Notify for three results
// hung when the other two came after the first wake-up was taken.)
func testPoolOrdered(t *testing.T, ordered bool) {
	p := newTestPool(3)
	if ordered {
		p.SetOrdered(1)
	}
	var held []task
	for i := range 3 {
		h := task{id: i, block: make(chan struct{}), started: make(chan struct{})}
		held = append(held, h)
		p.Submit(context.Background(), h)
		<-h.started
	}
	p.Submit(context.Background(), task{id: 3}, task{id: 4})
	p.SetHungry(true)
	p.mu.Lock()
	starving := p.starving() // two queued
	p.mu.Unlock()
	if n := p.Outstanding(); n != 5 {
		t.Fatalf("ordered %v: %d outstanding, want 5", ordered, n)
	}
	if starving == ordered {
		t.Fatalf("ordered %v: starving %v with two queued and three workers", ordered, starving)
	}
	p.SetHungry(false)
	close(held[0].block) // it and the two queued return; two still run
	synctest.Wait()
	p.mu.Lock()
	done := len(p.done)
	p.mu.Unlock()
	if done != 3 {
		t.Fatalf("ordered %v: %d results in, want 3", ordered, done)
	}
	ok, wait := p.ShouldCommit(time.Now(), 100)
	if ok != ordered || !ordered && wait <= 0 {
		t.Fatalf("ordered %v: three results in, two running: commit now %v (wait %v)", ordered, ok, wait)
	}
	close(held[1].block)
	close(held[2].block)
	take(t, p, 5)
	closeNow(p)
}

// TestPoolCountsRunningOnly: Executing counts what workers run, not what
// waits for a worker nor what was abandoned past its deadline (Stuck);
// Task says since when a worker runs a task, not when it was submitted.
func TestPoolCountsRunningOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(1)
		defer closeNow(p)
		held := task{id: 0, block: make(chan struct{})}
		p.Submit(context.Background(), held)
		seq := p.Submit(context.Background(), task{id: 1}, task{id: 2}, task{id: 3})
		synctest.Wait()
		if n := p.Executing(); n != 1 {
			t.Fatalf("Executing() = %d with one worker held and three tasks queued, want 1", n)
		}
		if st, _ := p.Task(seq); st != TaskQueued {
			t.Fatalf("Task says a queued task is %d", st)
		}
		time.Sleep(time.Second)
		close(held.block)
		synctest.Wait()
		take(t, p, 4)
		hung := task{id: 4, block: make(chan struct{}), overran: make(chan struct{}), started: make(chan struct{})}
		submitted := time.Now()
		time.Sleep(time.Second)
		s := p.Submit(context.Background(), hung)
		<-hung.started
		if st, at := p.Task(s); st != TaskRunning || !at.Equal(submitted.Add(time.Second)) {
			t.Fatalf("Task = %d %v, want running since a worker took it", st, at)
		}
		<-hung.overran
		take(t, p, 1)
		if n, stuck := p.Executing(), p.Stuck(); n != 0 || stuck != 1 {
			t.Fatalf("Executing() = %d, Stuck() = %d with the one task abandoned, want 0 and 1", n, stuck)
		}
		close(hung.block)
	})
}

// TestPoolCloseGivesUp: Wait waits for a task that ignores its context
// only until its wait ends, then says which it gave up on; the worker
// still returns when the task does.
func TestPoolCloseGivesUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newTestPool(2)
		hung := task{id: 7, block: make(chan struct{}), started: make(chan struct{})}
		p.Submit(context.Background(), hung, task{id: 8})
		<-hung.started
		wait, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		start := time.Now()
		p.Close()
		left := p.Wait(wait, describe)
		if d := time.Since(start); d != 5*time.Second || len(left) != 1 || left[0] != "task 7, 5s" {
			t.Fatalf("Close returned after %v with %v, want after 5s with task 7 running 5s", d, left)
		}
		close(hung.block)
		synctest.Wait() // the worker returns: the bubble ends with no goroutine left
	})
}

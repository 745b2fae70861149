package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/statedb"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler"
)

// orderOps records which keys Update was called for, in order and when,
// and runs each for what its object's Value says: "hang" blocks until
// release is closed, "<n>ms" sleeps that long.
type orderOps struct {
	mu      sync.Mutex
	order   []string
	started map[string]time.Duration // since start
	start   time.Time
	release chan struct{}
}

func newOrderOps() *orderOps {
	return &orderOps{started: map[string]time.Duration{}, start: time.Now(), release: make(chan struct{})}
}

func (o *orderOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *testObject) error {
	o.mu.Lock()
	o.order = append(o.order, obj.ID)
	if _, ok := o.started[obj.ID]; !ok {
		o.started[obj.ID] = time.Since(o.start)
	}
	o.mu.Unlock()
	switch d, err := time.ParseDuration(obj.Value); {
	case obj.Value == "hang":
		select {
		case <-o.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	case err == nil:
		time.Sleep(d)
	}
	return nil
}

func (o *orderOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *testObject) error {
	return nil
}

func (o *orderOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*testObject, statedb.Revision]) error {
	return nil
}

func (o *orderOps) calls() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.order)
}

// prio and tenant read an object's priority and fairness key from its ID
// ("hi-3", "lo-7", "a/1", "b/1").
func prio(o *testObject) int {
	if strings.HasPrefix(o.ID, "hi") {
		return 10
	}
	return 0
}

func tenant(o *testObject) string { t, _, _ := strings.Cut(o.ID, "/"); return t }

// inOrderBubble starts, in a synctest bubble, a reconciler over orderOps
// with cfg's ordering options, each of modify applied last, and runs fn.
func inOrderBubble(t *testing.T, cfg reconciler.Config[*testObject], fn func(t *testing.T, f *fixture, ops *orderOps, r reconciler.Reconciler[*testObject]),
	modify ...func(*reconciler.Config[*testObject])) {
	synctest.Test(t, func(t *testing.T) {
		f := startedFixture(t)
		ops := newOrderOps()
		cfg.RoundRateLimiter = rate.NewLimiter(rate.Inf, 1)
		cfg.FullReconciliationInterval, cfg.RefreshInterval = reconciler.Off, reconciler.Off
		cfg = testConfig(f, ops, cfg)
		for _, m := range modify {
			m(&cfg)
		}
		r, err := reconciler.New(cfg, f.params)
		if err != nil {
			t.Fatal(err)
		}
		f.markInit()
		fn(t, f, ops, r)
		close(ops.release)
	})
}

func objs(value string, ids ...string) []*testObject {
	var out []*testObject
	for _, id := range ids {
		out = append(out, &testObject{ID: id, Value: value, Status: reconciler.StatusPending()})
	}
	return out
}

func ids(prefix string, n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%02d", prefix, i))
	}
	return out
}

// TestPriorityFirst: with one worker busy, a backlog of low-priority
// changes and then one of high priority: the high one runs next; the low
// ones in the order they came.
func TestPriorityFirst(t *testing.T) {
	inOrderBubble(t, reconciler.Config[*testObject]{Priority: prio}, func(t *testing.T, f *fixture, ops *orderOps, r reconciler.Reconciler[*testObject]) {
		insert(t, f, objs("10ms", "busy")...)
		synctest.Wait() // busy runs
		insert(t, f, append(objs("1ms", ids("lo-", 10)...), objs("1ms", "hi-0")...)...)
		time.Sleep(time.Second)
		synctest.Wait()
		want := append([]string{"busy", "hi-0"}, ids("lo-", 10)...)
		if got := ops.calls(); !slices.Equal(got, want) {
			t.Fatalf("Update order %v, want %v", got, want)
		}
	})
}

// TestFairnessRoundRobin: a busy tenant's backlog does not hold up a quiet
// tenant's change, which waits for one of the busy tenant's requests.
func TestFairnessRoundRobin(t *testing.T) {
	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprint("fairness=", fair), func(t *testing.T) {
			cfg := reconciler.Config[*testObject]{TargetKey: func(*testObject) string { return "" }, TargetConcurrency: 1}
			if fair {
				cfg = reconciler.Config[*testObject]{FairnessKey: tenant}
			}
			inOrderBubble(t, cfg, func(t *testing.T, f *fixture, ops *orderOps, r reconciler.Reconciler[*testObject]) {
				insert(t, f, objs("10ms", "busy")...)
				synctest.Wait()
				insert(t, f, append(objs("1ms", ids("a/", 20)...), objs("1ms", "b/0")...)...)
				time.Sleep(time.Second)
				synctest.Wait()
				at := slices.Index(ops.calls(), "b/0")
				switch {
				case fair && at > 3:
					t.Fatalf("b/0 ran %dth, behind tenant a's backlog: %v", at, ops.calls())
				case !fair && at != 21:
					t.Fatalf("without a fairness key b/0 ran %dth, want last (21st): %v", at, ops.calls())
				}
			})
		})
	}
}

// TestTargetCap: a target whose operations hang holds at most
// TargetConcurrency workers; the other target's objects all run, and the
// hung target's next one waits, as Explain says.
func TestTargetCap(t *testing.T) {
	target := func(o *testObject) string { t, _, _ := strings.Cut(o.ID, "/"); return t }
	cfg := reconciler.Config[*testObject]{TargetKey: target, TargetConcurrency: 1, Concurrency: 4}
	inOrderBubble(t, cfg, func(t *testing.T, f *fixture, ops *orderOps, r reconciler.Reconciler[*testObject]) {
		insert(t, f, append(objs("hang", "hung/0", "hung/1"), objs("1ms", ids("ok/", 20)...)...)...)
		time.Sleep(time.Second)
		synctest.Wait()
		calls := ops.calls()
		if slices.Contains(calls, "hung/1") || len(calls) != 21 {
			t.Fatalf("calls %v: want hung/0 and every ok/ object, and hung/1 waiting for its target", calls)
		}
		e, err := r.Explain(context.Background(), []byte("hung/1"))
		if err != nil || e.State != reconciler.KeyQueued || !strings.Contains(e.Reason, `target "hung" at its cap (1 running)`) {
			t.Fatalf("Explain(hung/1) = %v: %+v", err, e)
		}
	})
}

// TestAgingBound: a low-priority request is passed over while
// high-priority ones keep coming, but once it has waited MaxWait it goes
// before every one that came after it: it is taken within MaxWait and the
// operation ahead of it, never starved.
func TestAgingBound(t *testing.T) {
	const maxWait = 20 * time.Millisecond
	cfg := reconciler.Config[*testObject]{Priority: prio, MaxWait: maxWait}
	inOrderBubble(t, cfg, func(t *testing.T, f *fixture, ops *orderOps, r reconciler.Reconciler[*testObject]) {
		// The worker is busy, and the two tasks an ordered loop queues
		// beside it (its lookahead with Concurrency 1) are taken: lo-0
		// waits in the order from the start.
		insert(t, f, objs("10ms", "hi-busy")...)
		insert(t, f, objs("1ms", "hi-next1", "hi-next2")...)
		synctest.Wait()
		start := time.Since(ops.start)
		insert(t, f, objs("1ms", "lo-0")...)
		for i := range 100 { // two high-priority changes a millisecond: more than the one worker does
			insert(t, f, objs("1ms", fmt.Sprintf("hi-%03da", i), fmt.Sprintf("hi-%03db", i))...)
			time.Sleep(time.Millisecond)
			if i == 5 {
				synctest.Wait()
				if s := r.Status().Ready; len(s) != 2 || s[0].Priority != 10 || s[1].Priority != 0 {
					t.Errorf("Status().Ready = %+v, want the oldest waits of priorities 10 and 0", s)
				}
				e, err := r.Explain(context.Background(), []byte("lo-0"))
				if err != nil || !strings.Contains(e.Reason, "higher priority") {
					t.Errorf("Explain(lo-0) = %v: %+v", err, e)
				}
			}
		}
		synctest.Wait()
		ops.mu.Lock()
		at, ran := ops.started["lo-0"]
		ops.mu.Unlock()
		// The pool asks for work when its queue runs dry: at 11ms, when
		// hi-next2 starts, and then every two 1ms operations. Overdue at
		// 20ms, lo-0 goes out first at the next hand-out (by 21ms) and
		// starts when the operation running then ends: by 22ms.
		if waited := at - start; !ran || waited > maxWait+2*time.Millisecond {
			t.Fatalf("lo-0 started %v after it was written (ran: %v), want within MaxWait %v and the operation queued ahead of it", waited, ran, maxWait)
		}
	})
}

// TestReadAhead: a change of high priority written behind a backlog the
// loop has not read yet is read ahead of it and runs within a few
// operations, not when the reader reaches it. Reading costs time here:
// TargetKey takes 100µs for a backlog row (it is asked once a row is in
// the table), so the reader, 10 rows a step, needs 100ms for the backlog.
func TestReadAhead(t *testing.T) {
	slowRead := func(o *testObject) string {
		if !strings.HasPrefix(o.ID, "hi") {
			time.Sleep(100 * time.Microsecond)
		}
		return ""
	}
	cfg := reconciler.Config[*testObject]{Priority: prio, TargetKey: slowRead, TargetConcurrency: 4, RoundSize: 10}
	inOrderBubble(t, cfg, func(t *testing.T, f *fixture, ops *orderOps, r reconciler.Reconciler[*testObject]) {
		insert(t, f, objs("1ms", ids("lo-", 1000)...)...)
		time.Sleep(5 * time.Millisecond)
		written := time.Since(ops.start)
		insert(t, f, objs("1ms", "hi-0")...)
		time.Sleep(time.Second)
		synctest.Wait()
		ops.mu.Lock()
		at, ran := ops.started["hi-0"]
		ops.mu.Unlock()
		// Read at the loop's next step (a millisecond), it goes out at the
		// next hand-out, behind the operation running and the two queued.
		if waited := at - written; !ran || waited > 5*time.Millisecond {
			t.Fatalf("hi-0 started %v after it was written (ran: %v), want within the next step and three operations", waited, ran)
		}
	})
}

// TestAgingPastHungTarget: a target whose operation hangs, at its cap with
// a backlog of hundreds of rows ahead in the level, does not stop aging
// for another target's row: once that row has waited MaxWait it starts
// before the later rows of higher priority that keep coming.
func TestAgingPastHungTarget(t *testing.T) {
	const maxWait = 20 * time.Millisecond
	for _, hung := range []int{10, 70, 300} {
		t.Run(fmt.Sprint("hung=", hung), func(t *testing.T) {
			cfg := reconciler.Config[*testObject]{
				Priority:  func(o *testObject) int { return b2i(strings.HasPrefix(o.ID, "ok/hi")) * 10 },
				TargetKey: func(o *testObject) string { t, _, _ := strings.Cut(o.ID, "/"); return t },
				MaxWait:   maxWait, TargetConcurrency: 1, Concurrency: 2,
			}
			inOrderBubble(t, cfg, func(t *testing.T, f *fixture, ops *orderOps, r reconciler.Reconciler[*testObject]) {
				insert(t, f, objs("hang", ids("hung/", hung)...)...)
				synctest.Wait() // hung/00 hangs: its target is at its cap
				start := time.Since(ops.start)
				insert(t, f, objs("1ms", "ok/lo")...)
				for i := range 100 { // two a millisecond: more than the one free worker does
					insert(t, f, objs("1ms", fmt.Sprintf("ok/hi-%03da", i), fmt.Sprintf("ok/hi-%03db", i))...)
					time.Sleep(time.Millisecond)
				}
				synctest.Wait()
				ops.mu.Lock()
				at, ran := ops.started["ok/lo"]
				ops.mu.Unlock()
				// Overdue at 20ms, it is handed out at the next hand-out
				// and starts behind the operation running and the two
				// queued for the free worker.
				if waited := at - start; !ran || waited > maxWait+4*time.Millisecond {
					t.Fatalf("ok/lo started %v after it was written (ran: %v), want within MaxWait %v and the operations queued ahead of it", waited, ran, maxWait)
				}
			})
		})
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestReadAheadJudgesAgainstBacklog: a change the order takes first is
// read ahead of the backlog written before it, even when, as the reader
// looked ahead, nothing queued was of a level it goes before. Priority:
// one write of 10 rows of top priority, 1,000 of low and then one of
// middle priority, read 10 a step: the middle row runs after the top
// rows, not after the low rows the reader reads meanwhile. Fairness: a
// busy key's 1,000 rows, every row read so far already handed out, then
// a quiet key's change: it runs at once, not once the reader reaches it.
func TestReadAheadJudgesAgainstBacklog(t *testing.T) {
	for _, mode := range []string{"priority", "fairness"} {
		t.Run(mode, func(t *testing.T) {
			// Reading costs time, as in a burst: TargetKey takes 100µs
			// for a backlog row, so the reader needs 100ms for them.
			slowRead := func(o *testObject) string {
				if strings.HasPrefix(o.ID, "lo-") || strings.HasPrefix(o.ID, "a/") {
					time.Sleep(100 * time.Microsecond)
				}
				return ""
			}
			cfg := reconciler.Config[*testObject]{RoundSize: 10, Concurrency: 1, TargetKey: slowRead, TargetConcurrency: 16}
			var backlog []*testObject
			last := "mid"
			if mode == "priority" {
				cfg.Priority = func(o *testObject) int {
					return map[string]int{"top": 20, "mid": 10}[strings.SplitN(o.ID, "-", 2)[0]]
				}
				backlog = append(objs("1ms", ids("top-", 10)...), objs("1ms", ids("lo-", 1000)...)...)
			} else {
				cfg.FairnessKey, cfg.Concurrency = tenant, 16
				backlog, last = objs("1ms", ids("a/", 1000)...), "b/0"
			}
			inOrderBubble(t, cfg, func(t *testing.T, f *fixture, ops *orderOps, r reconciler.Reconciler[*testObject]) {
				wtxn := f.db.WriteTxn(f.table)
				for _, o := range backlog {
					f.table.Insert(wtxn, o)
				}
				if mode == "fairness" {
					wtxn.Commit()
					time.Sleep(5 * time.Millisecond) // the reader is 50 rows in, the read-ahead past them all
					wtxn = f.db.WriteTxn(f.table)
				}
				written := time.Since(ops.start)
				f.table.Insert(wtxn, objs("1ms", last)[0])
				wtxn.Commit()
				time.Sleep(time.Second)
				synctest.Wait()
				ops.mu.Lock()
				at, ran := ops.started[last]
				ops.mu.Unlock()
				// Priority: behind the 10 rows read before it and the few
				// handed out. Fairness: at the next step.
				if waited := at - written; !ran || waited > 20*time.Millisecond {
					t.Fatalf("%s started %v after it was written (ran: %v): not read ahead of the backlog written before it", last, waited, ran)
				}
			})
		})
	}
}

// TestExplainPastMaxWait: Explain says a row that has waited past MaxWait
// goes before the later rows of higher priority, and it then does; a
// row not yet past it is behind them, as counted.
func TestExplainPastMaxWait(t *testing.T) {
	const maxWait = 20 * time.Millisecond
	cfg := reconciler.Config[*testObject]{Priority: prio, MaxWait: maxWait}
	inOrderBubble(t, cfg, func(t *testing.T, f *fixture, ops *orderOps, r reconciler.Reconciler[*testObject]) {
		insert(t, f, objs("100ms", "hi-busy")...)
		insert(t, f, objs("1ms", "hi-next1", "hi-next2")...) // handed out beside it (the lookahead)
		synctest.Wait()
		insert(t, f, objs("1ms", "lo-0")...)
		time.Sleep(time.Millisecond)
		insert(t, f, objs("1ms", ids("hi-late", 5)...)...)
		time.Sleep(5 * time.Millisecond)
		synctest.Wait()
		e, err := r.Explain(context.Background(), []byte("lo-0"))
		if err != nil || e.State != reconciler.KeyQueued || !strings.Contains(e.Reason, "waiting behind 5 request(s) of higher priority") {
			t.Fatalf("Explain(lo-0) before MaxWait = %v: %+v", err, e)
		}
		time.Sleep(maxWait)
		synctest.Wait()
		e, err = r.Explain(context.Background(), []byte("lo-0"))
		if err != nil || e.State != reconciler.KeyQueued || !strings.Contains(e.Reason, "waited past MaxWait (20ms)") ||
			!strings.Contains(e.Reason, "0 that waited longer go first") {
			t.Fatalf("Explain(lo-0) past MaxWait = %v: %+v", err, e)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		calls := ops.calls()
		if at := slices.Index(calls, "lo-0"); at != 3 {
			t.Fatalf("lo-0 ran %dth, want right after what was handed out before it: %v", at, calls)
		}
	})
}

// TestExplainReadAheadDone: a change read ahead of a backlog and
// reconciled is Done for Explain while the backlog is still being read:
// the only change of it past the reader is its own status write.
func TestExplainReadAheadDone(t *testing.T) {
	slowRead := func(o *testObject) string {
		if !strings.HasPrefix(o.ID, "hi") {
			time.Sleep(100 * time.Microsecond)
		}
		return ""
	}
	cfg := reconciler.Config[*testObject]{Priority: prio, TargetKey: slowRead, TargetConcurrency: 4, RoundSize: 10}
	inOrderBubble(t, cfg, func(t *testing.T, f *fixture, ops *orderOps, r reconciler.Reconciler[*testObject]) {
		insert(t, f, objs("1ms", ids("lo-", 1000)...)...)
		time.Sleep(5 * time.Millisecond)
		insert(t, f, objs("1ms", "hi-0")...)
		time.Sleep(10 * time.Millisecond) // read ahead and Done; the backlog takes 100ms to read
		synctest.Wait()
		e, err := r.Explain(context.Background(), []byte("hi-0"))
		if err != nil || e.State != reconciler.KeyDone || e.Status.Kind != reconciler.StatusKindDone {
			t.Fatalf("Explain(hi-0) = %v: %s", err, e)
		}
		e, err = r.Explain(context.Background(), []byte("lo-999"))
		if err != nil || e.State != reconciler.KeyUnread || !strings.Contains(e.Reason, "behind a backlog") {
			t.Fatalf("Explain(lo-999) = %v: %s", err, e)
		}
	})
}

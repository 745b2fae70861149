package reconciler_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// sleepyOps is an Operations whose Update takes d (bubble time) first;
// it records when the Update of key watch returned.
type sleepyOps struct {
	reconciler.Operations[*testObject]
	d     time.Duration
	watch string
	mu    sync.Mutex
	at    time.Time
}

func (o *sleepyOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	time.Sleep(o.d)
	err := o.Operations.Update(ctx, txn, rev, obj)
	if obj.ID == o.watch {
		o.mu.Lock()
		o.at = time.Now()
		o.mu.Unlock()
	}
	return err
}

// TestOrderedBacklogWritesTogether: in ordered mode the loop takes results
// as they come, yet a backlog's statuses are written a few hundred to a
// transaction (one commit each, counted by Metrics.Round), not one or two,
// while a lone high-priority change behind the backlog is written at once
// instead of waiting with them.
func TestOrderedBacklogWritesTogether(t *testing.T) {
	const backlog = 2000
	rec := &roundRecorder{}
	sleepy := &sleepyOps{d: time.Millisecond, watch: "hi"}
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.Priority = func(o *testObject) int {
				if strings.HasPrefix(o.ID, "hi") {
					return 1
				}
				return 0
			}
			cfg.Concurrency = 16
			cfg.Metrics = rec
			sleepy.Operations = cfg.Operations
			cfg.Operations = sleepy
		},
		func(f *fixture, ops *timedOps) {
			objs := make([]*testObject, backlog)
			for i := range objs {
				objs[i] = pendingObject(fmt.Sprintf("lo-%04d", i), "v")
			}
			insert(t, f, objs...)
			time.Sleep(20 * time.Millisecond) // well into the backlog
			rec.mu.Lock()
			rec.start = time.Now()
			rec.mu.Unlock()
			insert(t, f, pendingObject("hi", "v"))
			for {
				obj, _, watch, _ := f.table.GetWatch(f.db.ReadTxn(), idIndex.Query("hi"))
				if obj.Status.Kind == reconciler.StatusKindDone {
					break
				}
				<-watch
			}
			// Its status is written as its Update returns (no bubble
			// time passes), not when the backlog's commit is due.
			sleepy.mu.Lock()
			if d := time.Since(sleepy.at); sleepy.at.IsZero() || d != 0 {
				t.Errorf("the lone high-priority change was Done %v after its Update returned (at %v), want at once: its status waited with the backlog's", d, sleepy.at.Sub(rec.start))
			}
			sleepy.mu.Unlock()
			r, _ := f.reconciler("")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
				t.Fatal(err)
			}
			synctest.Wait()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			// 16 results a millisecond, held up to 10ms: about 160 a
			// commit. Taken as they come and written at once, the
			// commits would be of 16 or fewer: over 125.
			if n := len(rec.rounds); n > backlog/50 {
				t.Errorf("%d commits for %d objects, want at most %d: %v", n, backlog+1, backlog/50, rec.rounds[:min(n, 20)])
			}
		})
}

// TestExplainHeldStatus: Explain tells a status held back for a burst's
// commit from one being written, and says by when it goes out.
func TestExplainHeldStatus(t *testing.T) {
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.Priority = func(*testObject) int { return 0 }
			cfg.Concurrency = 16
			cfg.Operations = &sleepyOps{Operations: cfg.Operations, d: time.Millisecond}
		},
		func(f *fixture, ops *timedOps) {
			objs := make([]*testObject, 500)
			for i := range objs {
				objs[i] = pendingObject(fmt.Sprintf("lo-%03d", i), "v")
			}
			insert(t, f, objs...)
			// Three rounds of Updates in: their statuses wait in the
			// commit held open until 10ms after the first result.
			time.Sleep(3 * time.Millisecond)
			synctest.Wait()
			r, _ := f.reconciler("")
			held := 0
			for _, o := range objs {
				e, err := r.Explain(context.Background(), []byte(o.ID))
				if err != nil {
					t.Fatal(err)
				}
				if e.State == reconciler.KeyCommitting {
					const want = "its result is in; its status waits to be written with a burst's, in "
					if !strings.HasPrefix(e.Reason, want) || !strings.HasSuffix(e.Reason, " at the latest") {
						t.Fatalf("Explain(%s): %q, want %q...", o.ID, e.Reason, want)
					}
					held++
				}
			}
			if held < 16 {
				t.Errorf("%d keys Committing after 3ms of 16 workers, want at least 16 held", held)
			}
		})
}

// TestLoneChangeWrittenAtOnce: whatever the workers, a lone change (one
// of priority above a backlog's, or a quiet fairness key's only change
// beside a busy key's backlog) has its Done written as its Update
// returns, not held for the burst's commit; and while it runs Explain
// says Running from when its Update started.
func TestLoneChangeWrittenAtOnce(t *testing.T) {
	for _, conc := range []int{1, 4} {
		for _, mode := range []string{"priority", "fairness"} {
			t.Run(fmt.Sprintf("concurrency=%d/%s", conc, mode), func(t *testing.T) {
				sleepy := &sleepyOps{d: 3 * time.Millisecond, watch: "hi/0"}
				inBubble(t,
					func(cfg *reconciler.Config[*testObject]) {
						if mode == "priority" {
							cfg.Priority = func(o *testObject) int {
								if strings.HasPrefix(o.ID, "hi") {
									return 10
								}
								return 0
							}
						} else {
							cfg.FairnessKey = tenant
						}
						cfg.Concurrency = conc
						sleepy.Operations = cfg.Operations
						cfg.Operations = sleepy
					},
					func(f *fixture, ops *timedOps) {
						insert(t, f, objs("v", ids("lo/", 50)...)...)
						time.Sleep(5 * time.Millisecond)
						insert(t, f, pendingObject("hi/0", "v"))
						for {
							obj, _, watch, _ := f.table.GetWatch(f.db.ReadTxn(), idIndex.Query("hi/0"))
							if obj.Status.Kind == reconciler.StatusKindDone {
								break
							}
							<-watch
						}
						sleepy.mu.Lock()
						defer sleepy.mu.Unlock()
						if d := time.Since(sleepy.at); sleepy.at.IsZero() || d != 0 {
							t.Errorf("hi/0 was Done %v after its Update returned, want at once", d)
						}
					})
			})
		}
	}
}

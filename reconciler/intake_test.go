package reconciler_test

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler"
)

// TestIntakeWaitsForCommit: with more workers than processors, an
// ordered loop reading a backlog reads no more while a commit is out on
// the committer, so that its processor runs the committer and the
// workers; once the commit has landed it reads the rest, and every
// object is Done.
func TestIntakeWaitsForCommit(t *testing.T) {
	defer reconciler.SetForcePipelined(reconciler.SetForcePipelined(true))
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		if err := f.hive.Start(f.log, context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := f.hive.Stop(f.log, context.Background()); err != nil {
				t.Error(err)
			}
		})
		ops := newOrderOps()
		started := func() int {
			ops.mu.Lock()
			defer ops.mu.Unlock()
			return len(ops.started)
		}
		gate := make(chan struct{})
		release := sync.OnceFunc(func() { close(gate) })
		t.Cleanup(release) // before the hive stops
		cfg := testConfig(f, ops, reconciler.Config[*testObject]{
			Priority: prio,
			// Looking at an object takes 100µs: a commit goes out
			// while the backlog is read.
			FairnessKey: func(*testObject) string {
				time.Sleep(100 * time.Microsecond)
				return ""
			},
			Concurrency:                runtime.GOMAXPROCS(0) + 1,
			RoundRateLimiter:           rate.NewLimiter(rate.Inf, 1),
			FullReconciliationInterval: reconciler.Off,
			RefreshInterval:            reconciler.Off,
		})
		set := cfg.SetObjectStatus
		cfg.SetObjectStatus = func(o *testObject, s reconciler.Status) *testObject {
			if s.Kind == reconciler.StatusKindDone {
				<-gate // the committer's first write holds until released
			}
			return set(o, s)
		}
		if _, err := reconciler.New(cfg, f.params); err != nil {
			t.Fatal(err)
		}
		f.markInit()
		const n = 1000
		insert(t, f, objs("1ms", ids("lo-", n)...)...)
		time.Sleep(time.Second)
		synctest.Wait()
		// Only what was read can start: the Updates started tell how
		// far the loop read.
		if got := started(); got >= n {
			t.Fatalf("%d of %d Updates started while a commit was out: want the loop to stop reading", got, n)
		}
		release()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		done := 0
		for o := range f.table.All(f.db.ReadTxn()) {
			if o.Status.Kind == reconciler.StatusKindDone {
				done++
			}
		}
		if done != n || started() != n {
			t.Fatalf("%d of %d objects Done, %d Updates started, once the commit landed", done, n, started())
		}
	})
}

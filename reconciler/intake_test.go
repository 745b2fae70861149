package reconciler_test

import (
	"runtime"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// TestIntakeWaitsForCommit: with more workers than processors, an
// ordered loop reading a backlog reads no more while a commit is out on
// the committer, so that its processor runs the committer and the
// workers; once the commit has landed it reads the rest, and every
// object is Done.
func TestIntakeWaitsForCommit(t *testing.T) {
	defer reconciler.SetForcePipelined(reconciler.SetForcePipelined(true))
	cfg := reconciler.Config[*testObject]{
		Priority: prio,
		// Looking at an object takes 100µs: a commit goes out while the
		// backlog is read.
		FairnessKey: func(*testObject) string {
			time.Sleep(100 * time.Microsecond)
			return ""
		},
		Concurrency: runtime.GOMAXPROCS(0) + 1,
	}
	var release func()
	holdDone := func(cfg *reconciler.Config[*testObject]) {
		gate := make(chan struct{}) // in the bubble: waiting on it is durable
		release = sync.OnceFunc(func() { close(gate) })
		set := cfg.SetObjectStatus
		cfg.SetObjectStatus = func(o *testObject, s reconciler.Status) *testObject {
			if s.Kind == reconciler.StatusKindDone {
				<-gate // the committer's first write holds until released
			}
			return set(o, s)
		}
	}
	inOrderBubble(t, cfg, func(t *testing.T, f *fixture, ops *orderOps, _ reconciler.Reconciler[*testObject]) {
		t.Cleanup(release) // before the hive stops
		started := func() int {
			ops.mu.Lock()
			defer ops.mu.Unlock()
			return len(ops.started)
		}
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
	}, holdDone)
}

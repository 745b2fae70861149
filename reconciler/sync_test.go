package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// timedSync records when each Sync started, relative to start.
type timedSync struct {
	testSyncOps
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
}

func (o *timedSync) Sync(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[*testObject, statedb.Revision], changes iter.Seq[reconciler.Change[*testObject]]) error {
	o.mu.Lock()
	o.at = append(o.at, time.Since(o.start))
	o.mu.Unlock()
	return o.testSyncOps.Sync(ctx, txn, desired, changes)
}

func (o *timedSync) times() []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]time.Duration(nil), o.at...)
}

// inSyncBubble runs fn in a synctest bubble with a started hive and a
// whole-set reconciler configured by modify. The table is not initialized:
// fn calls f.markInit.
func inSyncBubble(t *testing.T, modify func(*reconciler.Config[*testObject]), fn func(f *fixture, ops *timedSync)) {
	synctest.Test(t, func(t *testing.T) {
		f := startedFixture(t)
		ops := &timedSync{testSyncOps: testSyncOps{target: f.target("")}, start: time.Now()}
		cfg := testConfig(f, nil, reconciler.Config[*testObject]{
			SyncOperations:             ops,
			FullReconciliationInterval: reconciler.Off,
		})
		modify(&cfg)
		r, err := reconciler.New(cfg, f.params)
		if err != nil {
			t.Fatal(err)
		}
		f.reconcilers[""] = r
		fn(f, ops)
	})
}

func pendingObject(id, value string) *testObject {
	return &testObject{ID: id, Value: value, Status: reconciler.StatusPending()}
}

// TestSyncWaitsForInitialization: a partial desired set would remove real
// state, so nothing is synced until the table is initialized, however long
// that takes; then one Sync takes the whole set.
func TestSyncWaitsForInitialization(t *testing.T) {
	inSyncBubble(t, func(*reconciler.Config[*testObject]) {}, func(f *fixture, ops *timedSync) {
		f.target("").Set("leftover", "x")
		insert(t, f, pendingObject("1", "one"), pendingObject("2", "two"))
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := len(ops.times()); n != 0 {
			t.Fatalf("%d Syncs before the table was initialized, want none", n)
		}
		f.markInit()
		synctest.Wait()
		if got := f.target("").History(); fmt.Sprint(got) != "[sync(n=2)]" {
			t.Fatalf("history %v, want [sync(n=2)]", got)
		}
		if got := fmt.Sprint(f.target("").State()); got != "map[1:one 2:two]" {
			t.Fatalf("target %s, want map[1:one 2:two]", got)
		}
	})
}

// TestSyncDebounceTrailing: a lone change is synced after the quiet period;
// a storm of changes that never goes quiet is synced once per MaxWait, so
// 10,000 single-object transactions become a handful of Syncs.
func TestSyncDebounceTrailing(t *testing.T) {
	const quiet, maxWait = 100 * time.Millisecond, time.Second
	inSyncBubble(t,
		func(cfg *reconciler.Config[*testObject]) { cfg.SyncDebounce = reconciler.Trailing(quiet, maxWait) },
		func(f *fixture, ops *timedSync) {
			f.markInit()
			synctest.Wait() // the first Sync, of the empty table
			time.Sleep(time.Second)

			ops.start = time.Now()
			insert(t, f, pendingObject("lone", "x"))
			time.Sleep(time.Second)
			synctest.Wait()
			if got := ops.times(); len(got) != 2 || got[1] != quiet {
				t.Fatalf("Syncs at %v, want the lone change's at %s", got, quiet)
			}

			// The storm: 10,000 changes 0.5ms apart, 5s in all.
			before := len(ops.times())
			for i := range 10_000 {
				time.Sleep(500 * time.Microsecond)
				insert(t, f, pendingObject(strconv.Itoa(i%100), strconv.Itoa(i)))
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			syncs := len(ops.times()) - before
			// One per MaxWait while the storm lasts, one after it.
			if syncs < 2 || syncs > 1+5+1 {
				t.Fatalf("%d Syncs for a 5s storm, want 2 to %d (%v)", syncs, 1+5+1, ops.times()[before:])
			}
			if err := reconciler.WaitForReconciliation(context.Background(), f.db, f.table.ToTable(), statusIndex); err != nil {
				t.Fatal(err)
			}
			state := f.target("").State()
			if state["99"] != "9999" || len(state) != 101 {
				t.Fatalf("target has %d keys, 99=%q; want 101 keys and the storm's last values", len(state), state["99"])
			}
		})
}

// TestSyncDebounceLeadingEdge: the first change goes at once, later ones
// at most once per refractory interval.
func TestSyncDebounceLeadingEdge(t *testing.T) {
	const refractory = 100 * time.Millisecond
	inSyncBubble(t,
		func(cfg *reconciler.Config[*testObject]) { cfg.SyncDebounce = reconciler.LeadingEdge(refractory) },
		func(f *fixture, ops *timedSync) {
			f.markInit()
			synctest.Wait()
			time.Sleep(time.Second)
			ops.start = time.Now()
			for i := range 10 {
				insert(t, f, pendingObject(strconv.Itoa(i), "v"))
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			got := ops.times()[1:]
			if fmt.Sprint(got) != "[0s 100ms]" {
				t.Fatalf("Syncs at %v, want [0s 100ms]", got)
			}
		})
}

// TestSyncSuspend: nothing is synced while suspended, everything after
// Resume; a Sync in flight when Stop comes writes nothing.
func TestSyncSuspend(t *testing.T) {
	inSyncBubble(t,
		func(cfg *reconciler.Config[*testObject]) { cfg.StartSuspended = true },
		func(f *fixture, ops *timedSync) {
			r := f.reconcilers[""]
			insert(t, f, pendingObject("1", "one"))
			f.markInit()
			time.Sleep(time.Minute)
			synctest.Wait()
			if n := len(ops.times()); n != 0 {
				t.Fatalf("%d Syncs while suspended, want none", n)
			}
			if st := r.Status(); !st.Suspended || st.Objects.Pending != 1 {
				t.Fatalf("status %+v, want suspended with 1 pending", st)
			}
			r.Resume()
			synctest.Wait()
			if got := fmt.Sprint(f.target("").History()); got != "[sync(n=1)]" {
				t.Fatalf("history %s after Resume, want [sync(n=1)]", got)
			}

			// A Sync that hangs until Stop: its result is not written.
			f.target("").SetFault("sync", fake.Fault{Mode: fake.ModeHang})
			insert(t, f, pendingObject("2", "two"))
			time.Sleep(time.Second)
			synctest.Wait()
			if err := f.hive.Stop(f.log, context.Background()); err != nil {
				t.Fatal(err)
			}
			obj, _, _ := f.table.Get(f.db.ReadTxn(), idIndex.Query("2"))
			if obj.Status.Kind != reconciler.StatusKindPending {
				t.Fatalf("object 2 is %s after Stop, want Pending: nothing is written after Stop", obj.Status.Kind)
			}
		})
}

// TestSyncSettledWaitsForRetry: a change whose Sync failed is not settled
// while the Sync that retries it runs, only once that Sync's Done is
// written.
func TestSyncSettledWaitsForRetry(t *testing.T) {
	inSyncBubble(t, func(*reconciler.Config[*testObject]) {}, func(f *fixture, ops *timedSync) {
		r := f.reconcilers[""]
		f.markInit()
		synctest.Wait() // the first Sync, of nothing
		f.target("").SetFault("sync", fake.Fault{Mode: fake.ModeRetryAt, After: 5 * time.Second, Count: 1})
		// Each Sync takes 3s: WaitUntilSettled must wait for the retry's.
		f.target("").SetLatency(func() time.Duration { return 3 * time.Second })
		insert(t, f, pendingObject("1", "one"))
		start := time.Now()
		if err := r.WaitUntilSettled(context.Background(), f.table.Revision(f.db.ReadTxn())); err != nil {
			t.Fatal(err)
		}
		obj, _, _ := f.table.Get(f.db.ReadTxn(), idIndex.Query("1"))
		if obj.Status.Kind != reconciler.StatusKindDone {
			t.Fatalf("object 1 is %s once settled (after %s, Syncs at %v), want Done",
				obj.Status, time.Since(start), ops.times())
		}
	})
}

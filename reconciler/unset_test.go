package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/hive/cell"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// An Unset status asks nothing of the reconciler (StatusKindUnset): these
// tests run in a synctest bubble, so "nothing happened" is checked after
// every goroutine has settled, and hours of retries and refreshes pass in
// no time.

// setStatus writes key's object again with st, its data unchanged.
func setStatus(t *testing.T, f *fixture, key string, st reconciler.Status) {
	t.Helper()
	obj := *f.get(key)
	obj.Status = st
	insert(t, f, &obj)
}

// opsOn returns the target's operations on key, in order.
func opsOn(tgt *fake.Target, key string) []string {
	var out []string
	for _, op := range tgt.History() {
		if fake.OpKey(op) == key {
			out = append(out, op)
		}
	}
	return out
}

// healthOf returns the level and error of a job's health.
func healthOf(f *fixture, job string) (cell.Level, error) {
	h := f.jobHealth(job)
	if h == nil {
		return "", nil
	}
	h.Lock() // SimpleHealth's fields are guarded by its root's lock
	defer h.Unlock()
	return h.Level, h.Error
}

// settled waits, in the bubble, until every change so far is settled.
func settled(t *testing.T, f *fixture) reconciler.Reconciler[*testObject] {
	t.Helper()
	synctest.Wait()
	r, err := f.reconciler("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // bubble time
	defer cancel()
	if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatalf("WaitUntilSettled: %v (%+v)", err, r.Status().Objects)
	}
	if err := reconciler.WaitForReconciliation(ctx, f.db, f.table, statusIndex); err != nil {
		t.Fatalf("WaitForReconciliation: %v", err)
	}
	return r
}

// TestUnsetIsNotReconciledUntilPending: an object inserted Unset is not
// Updated, is counted Unset (not Done), and the waits do not wait for it;
// set Pending, it is reconciled.
func TestUnsetIsNotReconciledUntilPending(t *testing.T) {
	inBubble(t, func(*reconciler.Config[*testObject]) {}, func(f *fixture, _ *timedOps) {
		insert(t, f,
			&testObject{ID: "u", Value: "v", Status: reconciler.StatusUnset()},
			&testObject{ID: "p", Value: "v", Status: reconciler.StatusPending()})
		r := settled(t, f)
		if got := fmt.Sprint(f.target("").State()); got != "map[p:v]" {
			t.Errorf("target %s, want only p: u is Unset", got)
		}
		if got := f.get("u").Status.Kind; got != reconciler.StatusKindUnset {
			t.Errorf("u is %s, want Unset", got)
		}
		if o := r.Status().Objects; o != (reconciler.ObjectCounts{Done: 1, Unset: 1}) {
			t.Errorf("Status().Objects = %+v, want 1 Done and 1 Unset", o)
		}

		setStatus(t, f, "u", reconciler.StatusPending())
		r = settled(t, f)
		if got := fmt.Sprint(f.target("").State()); got != "map[p:v u:v]" {
			t.Errorf("target %s once u is Pending, want u applied", got)
		}
		if got := f.get("u").Status.Kind; got != reconciler.StatusKindDone {
			t.Errorf("u is %s, want Done", got)
		}
		if o := r.Status().Objects; o != (reconciler.ObjectCounts{Done: 2}) {
			t.Errorf("Status().Objects = %+v, want 2 Done", o)
		}
	})
}

// TestUnsetWithdrawsARetry: an object failing with its retry scheduled is
// made Unset: the retry is withdrawn (no attempt follows, however long),
// the failure leaves Status and health, and the waits return.
func TestUnsetWithdrawsARetry(t *testing.T) {
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Second, time.Second
		},
		func(f *fixture, ops *timedOps) {
			f.target("").SetFault("x", fake.Fault{Mode: fake.ModeError}) // until healed
			insert(t, f, &testObject{ID: "x", Value: "v", Status: reconciler.StatusPending()})
			synctest.Wait()
			r, _ := f.reconciler("")
			if s := r.Status(); f.get("x").Status.Kind != reconciler.StatusKindError || s.Retries != 1 || s.Objects.Error != 1 {
				t.Fatalf("x is %s with %d retries and %d in Error, want a failure with its retry scheduled",
					f.get("x").Status.Kind, s.Retries, s.Objects.Error)
			}

			setStatus(t, f, "x", reconciler.StatusUnset())
			synctest.Wait()
			attempts := len(ops.attempts())
			s := r.Status()
			if s.Retries != 0 || s.Objects != (reconciler.ObjectCounts{Unset: 1}) {
				t.Errorf("after Unset: %d retries, objects %+v, want the retry withdrawn and x counted Unset", s.Retries, s.Objects)
			}
			if level, err := healthOf(f, "reconcile"); level != cell.StatusOK {
				t.Errorf("health %s (%v), want OK once the failing object is Unset", level, err)
			}
			settled(t, f)

			time.Sleep(time.Hour)
			synctest.Wait()
			if n := len(ops.attempts()); n != attempts {
				t.Errorf("%d attempts an hour after Unset, %d before: the withdrawn retry ran", n, attempts)
			}
			if got := f.get("x").Status.Kind; got != reconciler.StatusKindUnset {
				t.Errorf("x is %s, want Unset: no status is written for it", got)
			}

			// Asked again, it is reconciled.
			f.target("").Heal("x")
			setStatus(t, f, "x", reconciler.StatusPending())
			settled(t, f)
			if got := f.target("").State()["x"]; got != "v" || f.get("x").Status.Kind != reconciler.StatusKindDone {
				t.Errorf("x is %q in the target and %s, want applied and Done", got, f.get("x").Status.Kind)
			}
		})
}

// TestUnsetDiscardsARunningAttempt: an object made Unset while its Update
// runs: the Update's result is not written (the object stays Unset) and
// nothing runs again.
func TestUnsetDiscardsARunningAttempt(t *testing.T) {
	inBubble(t, func(*reconciler.Config[*testObject]) {}, func(f *fixture, ops *timedOps) {
		f.target("").SetFault("y", fake.Fault{Mode: fake.ModeStuck}) // blocks until healed, then succeeds
		insert(t, f, &testObject{ID: "y", Value: "v", Status: reconciler.StatusPending()})
		synctest.Wait()
		setStatus(t, f, "y", reconciler.StatusUnset())
		synctest.Wait()
		f.target("").Heal("y")
		r := settled(t, f)
		time.Sleep(time.Hour)
		synctest.Wait()
		if got := f.get("y").Status.Kind; got != reconciler.StatusKindUnset {
			t.Errorf("y is %s, want Unset: the running attempt's result is not written", got)
		}
		if n := len(ops.attempts()); n != 1 {
			t.Errorf("%d attempts, want the one that ran when y was made Unset", n)
		}
		if s := r.Status(); s.Objects != (reconciler.ObjectCounts{Unset: 1}) || s.InFlight != 0 || s.Waiting != 0 {
			t.Errorf("Status() objects %+v, %d in flight, %d waiting; want y counted Unset and nothing outstanding", s.Objects, s.InFlight, s.Waiting)
		}
	})
}

// TestUnsetDeletedIsDeleted: an Unset object deleted from the table gets
// its Delete, as any object does, though it was never Updated.
func TestUnsetDeletedIsDeleted(t *testing.T) {
	inBubble(t, func(*reconciler.Config[*testObject]) {}, func(f *fixture, _ *timedOps) {
		f.target("").Set("d", "old")
		insert(t, f, &testObject{ID: "d", Value: "v", Status: reconciler.StatusUnset()})
		settled(t, f)
		if got := opsOn(f.target(""), "d"); len(got) != 0 {
			t.Fatalf("operations on Unset d: %v, want none", got)
		}
		wtxn := f.db.WriteTxn(f.table)
		if _, _, err := f.table.Delete(wtxn, f.get("d")); err != nil {
			t.Fatal(err)
		}
		wtxn.Commit()
		settled(t, f)
		if got := opsOn(f.target(""), "d"); !slices.Equal(got, []string{"delete(d)"}) {
			t.Errorf("operations on d: %v, want its delete", got)
		}
		if _, ok := f.target("").State()["d"]; ok {
			t.Errorf("d still in the target")
		}
	})
}

// TestUnsetIsNotRefreshed: refresh marks a Done object written long ago,
// never an Unset one, however old.
func TestUnsetIsNotRefreshed(t *testing.T) {
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) { cfg.RefreshInterval = time.Hour },
		func(f *fixture, _ *timedOps) {
			old := time.Now().Add(-2 * time.Hour)
			insert(t, f,
				&testObject{ID: "d", Value: "v", Status: reconciler.Status{Kind: reconciler.StatusKindDone, UpdatedAt: old}},
				&testObject{ID: "u", Value: "v", Status: reconciler.Status{Kind: reconciler.StatusKindUnset, UpdatedAt: old}})
			synctest.Wait()
			time.Sleep(3 * time.Hour)
			synctest.Wait()
			if got := opsOn(f.target(""), "d"); len(got) < 2 || got[0] != "update-refresh(d)" {
				t.Errorf("operations on d: %v, want it refreshed at once and every hour", got)
			}
			if got := opsOn(f.target(""), "u"); len(got) != 0 {
				t.Errorf("operations on Unset u: %v, want none", got)
			}
			if got := f.get("u").Status; got.Kind != reconciler.StatusKindUnset || !got.UpdatedAt.Equal(old) {
				t.Errorf("u is %+v, want its Unset status untouched", got)
			}
		})
}

// TestUnsetIsPruneDesired: Prune is handed Unset objects as desired, so
// what the target holds for one stays; an object nobody wants goes.
func TestUnsetIsPruneDesired(t *testing.T) {
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) { cfg.FullReconciliationInterval = time.Hour },
		func(f *fixture, _ *timedOps) {
			synctest.Wait() // the prune at initialization, of an empty table, is done
			f.target("").Set("u", "old")
			f.target("").Set("stray", "x")
			insert(t, f, &testObject{ID: "u", Value: "new", Status: reconciler.StatusUnset()})
			r := settled(t, f)
			r.TriggerFullReconciliation()
			synctest.Wait()
			if got := fmt.Sprint(f.target("").State()); got != "map[u:old]" {
				t.Errorf("target %s after a prune, want u kept as it was and stray removed", got)
			}
			if got := opsOn(f.target(""), "u"); len(got) != 0 {
				t.Errorf("operations on Unset u: %v, want none", got)
			}
		})
}

// TestUnsetIsNotGained: with Ownership, a key gained whose object is
// Unset makes no request, where a Done one is applied again.
func TestUnsetIsNotGained(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	own := newFakeOwnership(ownsNone)
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return nil })
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{Ownership: own}))
	f.insert(t,
		&testObject{ID: "d", Value: "v", Status: reconciler.StatusDone()},
		&testObject{ID: "u", Value: "v", Status: reconciler.StatusUnset()})
	f.waitFor(ctx, t, "both unowned", func() bool { return r.Status().Objects.Unowned == 2 })
	own.Own(ownsAll)
	f.waitFor(ctx, t, "d applied again", func() bool { return ops.count("d") == 1 })
	if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	if n := ops.count("u"); n != 0 {
		t.Errorf("Unset u gained and reconciled %d times, want 0", n)
	}
	f.waitFor(ctx, t, "Status() counting 1 Done and 1 Unset", func() bool {
		return r.Status().Objects == reconciler.ObjectCounts{Done: 1, Unset: 1}
	})
}

// TestUnsetInWholeSetSync: a whole-set Sync is handed every object of the
// table, Unset ones included (it renders the desired state), but an Unset
// object asks for no Sync by itself and gets no status written.
func TestUnsetInWholeSetSync(t *testing.T) {
	inSyncBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.SyncDebounce = reconciler.Debounce{Quiet: 10 * time.Millisecond, MaxWait: time.Second}
		},
		func(f *fixture, ops *timedSync) {
			f.markInit()
			synctest.Wait()
			before := len(ops.times())
			insert(t, f, &testObject{ID: "u", Value: "v", Status: reconciler.StatusUnset()})
			time.Sleep(time.Minute)
			synctest.Wait()
			if n := len(ops.times()); n != before {
				t.Errorf("%d Syncs for an Unset object alone, want none", n-before)
			}
			insert(t, f, pendingObject("p", "v"))
			r := settled(t, f)
			if got := fmt.Sprint(f.target("").State()); got != "map[p:v u:v]" {
				t.Errorf("target %s, want the Sync to have rendered every object of the table", got)
			}
			if got := f.get("u").Status.Kind; got != reconciler.StatusKindUnset {
				t.Errorf("u is %s after the Sync, want Unset: no status is written into it", got)
			}
			if o := r.Status().Objects; o != (reconciler.ObjectCounts{Done: 1, Unset: 1}) {
				t.Errorf("Status().Objects = %+v, want 1 Done and 1 Unset", o)
			}
		})
}

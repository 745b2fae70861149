package reconciler_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// TestStatusCountsMatchIndex checks that the counts of Status(), kept up to
// date without scanning, equal a scan of the status index after every step
// of a scenario with inserts, failures, retries, deletes and refreshes.
func TestStatusCountsMatchIndex(t *testing.T) {
	f, ctx := startFixture(t, time.Minute)

	target := f.target("")
	ops := &testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }}
	r, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{
		Concurrency:                4,
		RoundRateLimiter:           rate.NewLimiter(rate.Inf, 1),
		RetryBackoffMin:            time.Millisecond,
		RetryBackoffMax:            2 * time.Millisecond,
		FullReconciliationInterval: reconciler.Off,
		RefreshInterval:            time.Nanosecond,
		RefreshRateLimiter:         rate.NewLimiter(rate.Inf, 1),
	}), f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.markInit()

	put := func(ids ...int) {
		wtxn := f.db.WriteTxn(f.table)
		for _, id := range ids {
			f.table.Insert(wtxn, &testObject{ID: strconv.Itoa(id), Value: "v" + strconv.Itoa(id), Status: reconciler.StatusPending()})
		}
		wtxn.Commit()
	}
	del := func(ids ...int) {
		wtxn := f.db.WriteTxn(f.table)
		for _, id := range ids {
			f.table.Delete(wtxn, &testObject{ID: strconv.Itoa(id)})
		}
		wtxn.Commit()
	}
	check := func(step string) {
		t.Helper()
		if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
			t.Fatalf("%s: %s", step, err)
		}
		txn := f.db.ReadTxn()
		var want reconciler.ObjectCounts
		for kind, n := range map[reconciler.StatusKind]*int{
			reconciler.StatusKindPending:    &want.Pending,
			reconciler.StatusKindRefreshing: &want.Refreshing,
			reconciler.StatusKindDone:       &want.Done,
			reconciler.StatusKindError:      &want.Error,
		} {
			for range f.table.List(txn, statusIndex.Query(kind)) {
				*n++
			}
		}
		if got := r.Status().Objects; got != want {
			t.Fatalf("%s: Status().Objects = %+v, the status index says %+v", step, got, want)
		}
	}

	put(1, 2, 3, 4, 5)
	check("insert")

	target.SetFault("2", fake.Fault{Mode: fake.ModePermanent})
	target.SetFault("3", fake.Fault{Mode: fake.ModePermanent})
	put(2, 3)
	check("permanent failures")

	target.SetFault("4", fake.Fault{Mode: fake.ModeError, Count: 3})
	put(4)
	check("retried until healed")

	del(1, 2)
	check("delete a done and a failed object")

	target.Heal("")
	put(3)
	check("failed object fixed")

	mark := target.Mark()
	r.TriggerFullReconciliation() // refreshes everything (RefreshInterval 1ns)
	expectPruneThenRefresh(ctx, t, target, mark, "prune(n=3)", "update-refresh(3)", "update-refresh(4)", "update-refresh(5)")
	check("refresh")

	del(3, 4, 5)
	check("empty")
}

// expectPruneThenRefresh waits until the operations of target after mark
// are prune, then the refreshes in any order (they are picked up in one
// round and may run at once), and fails the test otherwise.
func expectPruneThenRefresh(ctx context.Context, t *testing.T, target *fake.Target, mark int, prune string, refreshes ...string) {
	t.Helper()
	next, err := target.Expect(ctx, mark, []string{prune}, fake.Match{})
	if err == nil {
		_, err = target.Expect(ctx, next, refreshes, fake.Match{AnyOrder: true})
	}
	if err != nil {
		t.Fatal(err)
	}
}

package reconciler_test

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// TestStatusCountsMatchIndex checks that the counts of Status(), kept up to
// date without scanning, equal a scan of the status index after every step
// of a scenario with inserts, failures, retries, deletes and refreshes.
//
// It runs in a synctest bubble: refresh comes on its own schedule, an hour
// after the objects were last written, and the bubble's clock gets there
// at once.
func TestStatusCountsMatchIndex(t *testing.T) {
	synctest.Test(t, testStatusCountsMatchIndex)
}

func testStatusCountsMatchIndex(t *testing.T) {
	f, ctx := startFixture(t, 2*time.Hour)

	target := f.target("")
	ops := &testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }}
	r, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{
		Concurrency:                4,
		RoundRateLimiter:           rate.NewLimiter(rate.Inf, 1),
		RetryBackoffMin:            time.Millisecond,
		RetryBackoffMax:            2 * time.Millisecond,
		FullReconciliationInterval: reconciler.Off,
		RefreshInterval:            time.Hour,
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
	time.Sleep(time.Hour) // Done for RefreshInterval: refreshed
	if _, err := target.Expect(ctx, mark, []string{"update-refresh(3)", "update-refresh(4)", "update-refresh(5)"}, fake.Match{AnyOrder: true}); err != nil {
		t.Fatal(err)
	}
	check("refresh")

	del(3, 4, 5)
	check("empty")
}

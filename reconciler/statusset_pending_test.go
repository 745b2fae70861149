package reconciler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// Two reconcilers, a and b, share objects through a StatusSet, each with a
// status index of its own.
var (
	statusAIndex = index.NewStatusIndex("status-a", func(o *testObject) reconciler.Status { return o.Statuses.Get("a") })
	statusBIndex = index.NewStatusIndex("status-b", func(o *testObject) reconciler.Status { return o.Statuses.Get("b") })
)

// TestStatusSetPendingNamesBeforeAnyWrite checks statedb v0.9's
// StatusSet.Pending(names...) with converge's engine: an object inserted
// with NewStatusSet().Pending("a", "b") is Pending for both a and b in
// their status indexes and in WaitForReconciliation before either
// reconciler has written to it, stays Pending for b once a is Done, and is
// Done for both when both have run.
func TestStatusSetPendingNamesBeforeAnyWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var (
		db    *statedb.DB
		table statedb.RWTable[*testObject]
		recs  = map[string]reconciler.Reconciler[*testObject]{}
	)
	release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	started := make(chan string, 2)
	h := hive.New(
		statedb.Cell,
		job.Cell,
		reconciler.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("test", "Test",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db_ *statedb.DB, p reconciler.Params) (err error) {
				db = db_
				table, err = statedb.NewTable(db, "multi", idIndex, statusAIndex, statusBIndex)
				if err != nil {
					return err
				}
				for _, name := range []string{"a", "b"} {
					ops := newScriptedOps(func(ctx context.Context, _ string, _ int, _ *testObject) error {
						started <- name
						select {
						case <-release[name]:
							return nil
						case <-ctx.Done():
							return ctx.Err()
						}
					})
					f := &fixture{table: table}
					cfg := statusSetConfig(f, name, ops, reconciler.Config[*testObject]{})
					if recs[name], err = reconciler.New(cfg, p); err != nil {
						return err
					}
				}
				return nil
			}),
		),
	)
	log := hivetest.Logger(t)
	if err := h.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	}()

	wtxn := db.WriteTxn(table)
	if _, _, err := table.Insert(wtxn, &testObject{ID: "x", Statuses: reconciler.NewStatusSet().Pending("a", "b")}); err != nil {
		t.Fatal(err)
	}
	wtxn.Commit()

	// pendingFor reports whether x is listed as Pending by the index, and
	// what WaitForReconciliation says with a context that has ended: nil
	// when nothing is outstanding, context.Canceled otherwise.
	done, doneCancel := context.WithCancel(context.Background())
	doneCancel()
	check := func(when string, idx statedb.Index[*testObject, reconciler.StatusKind], wantPending bool) {
		t.Helper()
		_, _, found := table.Get(db.ReadTxn(), idx.Query(reconciler.StatusKindPending))
		if found != wantPending {
			t.Errorf("%s: %s lists x as Pending = %v, want %v", when, idx.Name, found, wantPending)
		}
		err := reconciler.WaitForReconciliation(done, db, table, idx)
		if wantPending && !errors.Is(err, context.Canceled) || !wantPending && err != nil {
			t.Errorf("%s: WaitForReconciliation(%s) = %v, want outstanding work = %v", when, idx.Name, err, wantPending)
		}
	}

	// Both operations have started and neither has written anything.
	<-started
	<-started
	x, _, _ := table.Get(db.ReadTxn(), idIndex.Query("x"))
	if x.Statuses.Len() != 2 || !x.Statuses.IsPendingOrRefreshing() || x.Statuses.IsDone() {
		t.Errorf("before any write: %s, want a and b held as Pending", x.Statuses)
	}
	check("before any write", statusAIndex, true)
	check("before any write", statusBIndex, true)

	close(release["a"])
	if err := recs["a"].WaitUntilSettled(ctx, table.Revision(db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	check("a done", statusAIndex, false)
	check("a done", statusBIndex, true)
	x, _, _ = table.Get(db.ReadTxn(), idIndex.Query("x"))
	if x.Statuses.IsDone() || !x.Statuses.IsPendingOrRefreshing() {
		t.Errorf("a done, b running: IsDone %v IsPendingOrRefreshing %v (%s)", x.Statuses.IsDone(), x.Statuses.IsPendingOrRefreshing(), x.Statuses)
	}

	close(release["b"])
	if err := reconciler.WaitForReconciliation(ctx, db, table, statusBIndex); err != nil {
		t.Fatal(err)
	}
	check("both done", statusAIndex, false)
	x, _, _ = table.Get(db.ReadTxn(), idIndex.Query("x"))
	if !x.Statuses.IsDone() || x.Statuses.IsPendingOrRefreshing() {
		t.Errorf("both done: %s, want IsDone", x.Statuses)
	}
}

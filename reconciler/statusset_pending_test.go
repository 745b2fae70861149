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

// blockedPair is two reconcilers, a and b, over one table of objects
// with a StatusSet, whose Updates each wait for their release.
type blockedPair struct {
	db      *statedb.DB
	table   statedb.RWTable[*testObject]
	recs    map[string]reconciler.Reconciler[*testObject]
	release map[string]chan struct{}
	started chan string // a name, when its Update starts
}

// startBlockedPair starts the hive of a blockedPair; it stops with the test.
func startBlockedPair(t *testing.T, ctx context.Context) *blockedPair {
	bp := &blockedPair{
		recs:    map[string]reconciler.Reconciler[*testObject]{},
		release: map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})},
		started: make(chan string, 2),
	}
	h := hive.New(
		statedb.Cell,
		job.Cell,
		reconciler.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("test", "Test",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p reconciler.Params) (err error) {
				bp.db = db
				bp.table, err = statedb.NewTable(db, "multi", idIndex, statusAIndex, statusBIndex)
				if err != nil {
					return err
				}
				for _, name := range []string{"a", "b"} {
					ops := newScriptedOps(func(ctx context.Context, _ string, _ int, _ *testObject) error {
						bp.started <- name
						select {
						case <-bp.release[name]:
							return nil
						case <-ctx.Done():
							return ctx.Err()
						}
					})
					cfg := statusSetConfig(&fixture{table: bp.table}, name, ops, reconciler.Config[*testObject]{})
					if bp.recs[name], err = reconciler.New(cfg, p); err != nil {
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
	t.Cleanup(func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return bp
}

// checkPending checks whether the status index idx lists x as Pending,
// and that WaitForReconciliation, with a context that has ended, says
// there is outstanding work exactly then.
func (bp *blockedPair) checkPending(t *testing.T, when string, idx statedb.Index[*testObject, reconciler.StatusKind], wantPending bool) {
	t.Helper()
	_, _, found := bp.table.Get(bp.db.ReadTxn(), idx.Query(reconciler.StatusKindPending))
	if found != wantPending {
		t.Errorf("%s: %s lists x as Pending = %v, want %v", when, idx.Name, found, wantPending)
	}
	done, doneCancel := context.WithCancel(context.Background())
	doneCancel()
	err := reconciler.WaitForReconciliation(done, bp.db, bp.table, idx)
	if wantPending && !errors.Is(err, context.Canceled) || !wantPending && err != nil {
		t.Errorf("%s: WaitForReconciliation(%s) = %v, want outstanding work = %v", when, idx.Name, err, wantPending)
	}
}

// x returns the object x as the table holds it now.
func (bp *blockedPair) x() *testObject {
	x, _, _ := bp.table.Get(bp.db.ReadTxn(), idIndex.Query("x"))
	return x
}

// TestStatusSetPendingNamesBeforeAnyWrite checks statedb v0.9's
// StatusSet.Pending(names...) with converge's engine: an object inserted
// with NewStatusSet().Pending("a", "b") is Pending for both a and b in
// their status indexes and in WaitForReconciliation before either
// reconciler has written to it, stays Pending for b once a is Done, and is
// Done for both when both have run.
func TestStatusSetPendingNamesBeforeAnyWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bp := startBlockedPair(t, ctx)
	wtxn := bp.db.WriteTxn(bp.table)
	if _, _, err := bp.table.Insert(wtxn, &testObject{ID: "x", Statuses: reconciler.NewStatusSet().Pending("a", "b")}); err != nil {
		t.Fatal(err)
	}
	wtxn.Commit()

	// Both operations have started and neither has written anything.
	<-bp.started
	<-bp.started
	if x := bp.x(); x.Statuses.Len() != 2 || !x.Statuses.IsPendingOrRefreshing() || x.Statuses.IsDone() {
		t.Errorf("before any write: %s, want a and b held as Pending", x.Statuses)
	}
	bp.checkPending(t, "before any write", statusAIndex, true)
	bp.checkPending(t, "before any write", statusBIndex, true)

	close(bp.release["a"])
	if err := bp.recs["a"].WaitUntilSettled(ctx, bp.table.Revision(bp.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
	bp.checkPending(t, "a done", statusAIndex, false)
	bp.checkPending(t, "a done", statusBIndex, true)
	if x := bp.x(); x.Statuses.IsDone() || !x.Statuses.IsPendingOrRefreshing() {
		t.Errorf("a done, b running: IsDone %v IsPendingOrRefreshing %v (%s)", x.Statuses.IsDone(), x.Statuses.IsPendingOrRefreshing(), x.Statuses)
	}

	close(bp.release["b"])
	if err := reconciler.WaitForReconciliation(ctx, bp.db, bp.table, statusBIndex); err != nil {
		t.Fatal(err)
	}
	bp.checkPending(t, "both done", statusAIndex, false)
	if x := bp.x(); !x.Statuses.IsDone() || x.Statuses.IsPendingOrRefreshing() {
		t.Errorf("both done: %s, want IsDone", x.Statuses)
	}
}

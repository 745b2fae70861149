package metrics_test

import (
	"context"
	"fmt"
	"iter"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// object is the desired object of the tests.
type object struct {
	ID     string            `json:"id" yaml:"id"`
	Value  string            `json:"value" yaml:"value"`
	Status reconciler.Status `json:"status" yaml:"status"`
}

func (o *object) Clone() *object { c := *o; return &c }

func (o *object) TableHeader() []string { return []string{"ID", "Value", "Status"} }

func (o *object) TableRow() []string { return []string{o.ID, o.Value, o.Status.Kind.String()} }

var idIndex = statedb.Index[*object, string]{
	Name:       "id",
	FromObject: func(o *object) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.String(o.ID)) },
	FromKey:    statedbindex.String,
	FromString: statedbindex.FromString,
	Unique:     true,
}

var statusIndex = index.NewStatusIndex("status", func(o *object) reconciler.Status { return o.Status })

// ops adapts a fake target to reconciler.Operations.
type ops struct{ target *fake.Target }

func (o ops) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *object) error {
	return o.target.Update(ctx, obj.ID, obj.Value, obj.Status.Kind == reconciler.StatusKindRefreshing)
}

func (o ops) Delete(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *object) error {
	return o.target.Delete(ctx, obj.ID)
}

func (o ops) Prune(ctx context.Context, _ statedb.ReadTxn, objs iter.Seq2[*object, statedb.Revision]) error {
	desired := map[string]bool{}
	for obj := range objs {
		desired[obj.ID] = true
	}
	return o.target.Prune(ctx, desired)
}

func newTarget() *fake.Target {
	return fake.New(fake.Wrappers{Permanent: reconciler.Permanent, RetryAfter: reconciler.RetryAfter})
}

// config is the reconciler of the tests: fast retries, no periodic full
// reconciliation or refresh, so that every operation is one the test asked
// for.
func config(table statedb.RWTable[*object], target *fake.Target, name string) reconciler.Config[*object] {
	return reconciler.Config[*object]{
		Table:                      table,
		GetObjectStatus:            func(o *object) reconciler.Status { return o.Status },
		SetObjectStatus:            func(o *object, s reconciler.Status) *object { o.Status = s; return o },
		CloneObject:                (*object).Clone,
		Operations:                 ops{target},
		Name:                       name,
		RoundRateLimiter:           rate.NewLimiter(rate.Inf, 1),
		RetryBackoffMin:            time.Millisecond,
		RetryBackoffMax:            10 * time.Millisecond,
		FullReconciliationInterval: reconciler.Off,
		RefreshInterval:            reconciler.Off,
	}
}

// fixture is a running hive with one reconciler over a table of objects.
type fixture struct {
	t      testing.TB
	hive   *hive.Hive
	db     *statedb.DB
	table  statedb.RWTable[*object]
	target *fake.Target
	rec    reconciler.Reconciler[*object]
}

// newFixture builds a hive with extra cells and a reconciler named name in
// module "test", constructed with reconciler.New; metrics is its
// Config.Metrics (nil: the module default). The hive is not started.
func newFixture(t testing.TB, name string, metrics reconciler.Metrics, extra ...cell.Cell) *fixture {
	f := &fixture{t: t, target: newTarget()}
	cells := append([]cell.Cell{
		statedb.Cell,
		job.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("test", "Test",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p reconciler.Params) (err error) {
				f.db = db
				f.table, err = statedb.NewTable(db, "objects", idIndex, statusIndex)
				if err != nil {
					return err
				}
				cfg := config(f.table, f.target, name)
				cfg.Metrics = metrics
				f.rec, err = reconciler.New(cfg, p)
				return err
			}),
		),
	}, extra...)
	f.hive = hive.New(cells...)
	return f
}

func (f *fixture) start() {
	f.t.Helper()
	log := hivetest.Logger(f.t)
	if err := f.hive.Start(log, context.Background()); err != nil {
		f.t.Fatalf("hive start: %s", err)
	}
	f.t.Cleanup(func() {
		if err := f.hive.Stop(log, context.Background()); err != nil {
			f.t.Errorf("hive stop: %s", err)
		}
	})
}

// insert inserts Pending objects with the given ids and returns the table
// revision after the insert.
func (f *fixture) insert(ids ...string) statedb.Revision {
	wtxn := f.db.WriteTxn(f.table)
	for _, id := range ids {
		if _, _, err := f.table.Insert(wtxn, &object{ID: id, Value: "v-" + id, Status: reconciler.StatusPending()}); err != nil {
			f.t.Fatalf("insert %s: %s", id, err)
		}
	}
	return f.table.Revision(wtxn.Commit())
}

// delete deletes the objects with the given ids and returns the table
// revision after the delete.
func (f *fixture) delete(ids ...string) statedb.Revision {
	wtxn := f.db.WriteTxn(f.table)
	for _, id := range ids {
		if _, _, err := f.table.Delete(wtxn, &object{ID: id}); err != nil {
			f.t.Fatalf("delete %s: %s", id, err)
		}
	}
	return f.table.Revision(wtxn.Commit())
}

// notifying forwards to a Metrics and wakes waiters after every call, so
// that tests wait for metrics to be recorded without sleeping or polling.
// It also remembers the last Gauges and how many full reconciliations
// ended.
type notifying struct {
	inner reconciler.Metrics

	mu          sync.Mutex
	changed     chan struct{}
	gauges      reconciler.Gauges
	fulls       int
	gaugesAfter bool // a Gauges call came after the last FullReconciliation
}

func newNotifying(inner reconciler.Metrics) *notifying {
	return &notifying{inner: inner, changed: make(chan struct{})}
}

func (n *notifying) Reconciler(id reconciler.ReconcilerID) reconciler.ReconcilerMetrics {
	return notifyingReconciler{n.inner.Reconciler(id), n}
}

func (n *notifying) update(fn func()) {
	n.mu.Lock()
	if fn != nil {
		fn()
	}
	close(n.changed)
	n.changed = make(chan struct{})
	n.mu.Unlock()
}

// waitFor waits until cond holds, checking it after every metrics call.
func (n *notifying) waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		n.mu.Lock()
		changed := n.changed
		n.mu.Unlock()
		if cond() {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-changed:
		}
	}
}

// settled reports whether rec has reconciled every change up to rev with
// no retry pending, and the gauges reported since then read zero.
func (n *notifying) settled(rec reconciler.Reconciler[*object], rev statedb.Revision) func() bool {
	return func() bool {
		done, cancel := context.WithCancel(context.Background())
		cancel() // WaitUntilReconciled then just reports where it is
		reconciled, retryLow, _ := rec.WaitUntilReconciled(done, rev)
		n.mu.Lock()
		defer n.mu.Unlock()
		return reconciled >= rev && retryLow > rev && n.gauges == reconciler.Gauges{}
	}
}

// fullDone reports whether the full reconciliations reached want and the
// gauges reported after the last one read zero.
func (n *notifying) fullDone(want int) func() bool {
	return func() bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		return n.fulls == want && n.gaugesAfter && n.gauges == reconciler.Gauges{}
	}
}

type notifyingReconciler struct {
	inner reconciler.ReconcilerMetrics
	n     *notifying
}

func (r notifyingReconciler) Operation(op reconciler.Op, res reconciler.Result, objects int, d time.Duration) {
	r.inner.Operation(op, res, objects, d)
	r.n.update(nil)
}

func (r notifyingReconciler) BatchEntries(op reconciler.Op, res reconciler.Result, n int) {
	r.inner.BatchEntries(op, res, n)
	r.n.update(nil)
}

func (r notifyingReconciler) Round(objects int, d time.Duration) {
	r.inner.Round(objects, d)
	r.n.update(nil)
}

func (r notifyingReconciler) FullReconciliation(d time.Duration, err error) {
	r.inner.FullReconciliation(d, err)
	r.n.update(func() { r.n.fulls++; r.n.gaugesAfter = false })
}

func (r notifyingReconciler) RetryScheduled() {
	r.inner.RetryScheduled()
	r.n.update(nil)
}

func (r notifyingReconciler) ReadyWaits(w []reconciler.ReadyWait) {
	r.inner.ReadyWaits(w)
	r.n.update(nil)
}

func (r notifyingReconciler) UnreconciledWrite() {
	r.inner.UnreconciledWrite()
	r.n.update(nil)
}

func (r notifyingReconciler) Realized(latencies []time.Duration) {
	r.inner.Realized(latencies)
	r.n.update(nil)
}

func (r notifyingReconciler) Gauges(g reconciler.Gauges) {
	r.inner.Gauges(g)
	r.n.update(func() { r.n.gauges = g; r.n.gaugesAfter = true })
}

// keys returns n object ids: o00, o01, ...
func keys(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("o%02d", i)
	}
	return ids
}

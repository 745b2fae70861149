package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// The bad-input tests' target and harness (badinput_test.go).

// badOps are testOps whose results can be replaced per key.
type badOps struct {
	*testOps

	mu     sync.Mutex
	result map[string]func() error // key ("prune" for Prune) -> what to return instead of calling the target
	calls  map[string]int
	called chan string
}

func newBadOps(target *fake.Target) *badOps {
	return &badOps{
		testOps: &testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }},
		result:  map[string]func() error{},
		calls:   map[string]int{},
		called:  make(chan string, 1000),
	}
}

// set makes key's operations return what result returns; nil heals.
func (o *badOps) set(key string, result func() error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if result == nil {
		delete(o.result, key)
	} else {
		o.result[key] = result
	}
}

func (o *badOps) override(key string) func() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls[key]++
	return o.result[key]
}

func (o *badOps) notify(key string) {
	select {
	case o.called <- key:
	default:
	}
}

func (o *badOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	defer o.notify(obj.ID)
	if f := o.override(obj.ID); f != nil {
		return f()
	}
	return o.testOps.Update(ctx, txn, rev, obj)
}

func (o *badOps) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	defer o.notify(obj.ID)
	if f := o.override(obj.ID); f != nil {
		return f()
	}
	return o.testOps.Delete(ctx, txn, rev, obj)
}

func (o *badOps) Prune(ctx context.Context, txn statedb.ReadTxn, objs iter.Seq2[*testObject, statedb.Revision]) error {
	defer o.notify("prune")
	if f := o.override("prune"); f != nil {
		return f()
	}
	return o.testOps.Prune(ctx, txn, objs)
}

func (o *badOps) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	eachEntry(ctx, txn, batch, o.Update)
}

func (o *badOps) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	eachEntry(ctx, txn, batch, o.Delete)
}

// badHarness is a hive with one reconciler over badOps.
type badHarness struct {
	t      *testing.T
	f      *fixture
	r      reconciler.Reconciler[*testObject]
	ops    *badOps
	target *fake.Target
}

// startBad starts a hive with an initialized table and a reconciler over
// badOps; edit may change the Config (batch sets BatchOperations).
func startBad(t *testing.T, batch bool, edit func(*reconciler.Config[*testObject])) *badHarness {
	t.Helper()
	target := fake.New(wrappers)
	ops := newBadOps(target)
	f, _ := startFixture(t, time.Minute)
	f.markInit()
	cfg := testConfig(f, ops, reconciler.Config[*testObject]{
		RetryBackoffMin: time.Millisecond,
		RetryBackoffMax: 10 * time.Millisecond,
	})
	if batch {
		cfg.BatchOperations = ops
	}
	if edit != nil {
		edit(&cfg)
	}
	r, err := reconciler.New(cfg, f.params)
	if err != nil {
		t.Fatalf("reconciler.New: %s", err)
	}
	return &badHarness{t: t, f: f, r: r, ops: ops, target: target}
}

func (h *badHarness) insert(objs ...*testObject) {
	wtxn := h.f.db.WriteTxn(h.f.table)
	for _, obj := range objs {
		if _, _, err := h.f.table.Insert(wtxn, obj); err != nil {
			h.t.Fatalf("insert %s: %s", obj.ID, err)
		}
	}
	wtxn.Commit()
}

func (h *badHarness) delete(ids ...string) {
	wtxn := h.f.db.WriteTxn(h.f.table)
	for _, id := range ids {
		if _, _, err := h.f.table.Delete(wtxn, &testObject{ID: id}); err != nil {
			h.t.Fatalf("delete %s: %s", id, err)
		}
	}
	wtxn.Commit()
}

// attempted waits until every change so far has been attempted once.
func (h *badHarness) attempted() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := h.r.WaitUntilReconciled(ctx, h.f.table.Revision(h.f.db.ReadTxn())); err != nil {
		h.t.Fatalf("changes not attempted: %s", err)
	}
}

// attemptedMisconfigured waits until the misconfiguration the changes so
// far run into is reported: the waits return an error wrapping
// ErrInvalidConfig, rather than nil, while objects cannot be reconciled.
func (h *badHarness) attemptedMisconfigured() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, _, err := h.r.WaitUntilReconciled(ctx, h.f.table.Revision(h.f.db.ReadTxn()))
	if !errors.Is(err, reconciler.ErrInvalidConfig) {
		h.t.Fatalf("WaitUntilReconciled = %v, want an error wrapping ErrInvalidConfig", err)
	}
}

// settled waits until every change so far is reconciled and every object
// is Done.
func (h *badHarness) settled() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.f.waitReconciled(ctx, h.r, true); err != nil {
		h.t.Fatalf("not reconciled: %s; status: %+v", err, h.r.Status())
	}
}

// waitCalls waits until key's operations have been called n times in all.
func (h *badHarness) waitCalls(key string, n int) {
	h.t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		h.ops.mu.Lock()
		got := h.ops.calls[key]
		h.ops.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-h.ops.called:
		case <-timeout:
			h.t.Fatalf("%s: %d operation(s), want %d", key, got, n)
		}
	}
}

func (h *badHarness) get(id string) (*testObject, statedb.Revision, bool) {
	return h.f.table.Get(h.f.db.ReadTxn(), idIndex.Query(id))
}

// goodObjects are the bystanders of every case: they must end Done and
// stay intact.
func goodObjects() []*testObject {
	return []*testObject{
		{ID: "good1", Value: "one", Status: reconciler.StatusPending()},
		{ID: "good2", Value: "two", Status: reconciler.StatusPending()},
	}
}

// checkGood checks the bystanders and the table's invariants.
func (h *badHarness) checkGood() {
	h.t.Helper()
	state := h.target.State()
	for _, want := range goodObjects() {
		obj, _, ok := h.get(want.ID)
		switch {
		case !ok:
			h.t.Errorf("%s is gone from the table", want.ID)
		case obj.ID != want.ID || obj.Value != want.Value || obj.Status.Kind != reconciler.StatusKindDone:
			h.t.Errorf("%s is %s=%s/%s, want %s/Done", want.ID, obj.ID, obj.Value, obj.Status.Kind, want.Value)
		case state[want.ID] != want.Value:
			h.t.Errorf("target has %s=%q, want %q", want.ID, state[want.ID], want.Value)
		}
	}
	checkTableInvariants(h.t, h.f.db, h.f.table.ToTable())
}

// checkTableInvariants checks what statedb promises of a table: each object
// once, under its own primary key, with a revision of its own no newer
// than the table's, and found under its status kind in the status index
// (an object mutated in place after insertion breaks that).
func checkTableInvariants(t *testing.T, db *statedb.DB, table statedb.Table[*testObject]) {
	t.Helper()
	txn := db.ReadTxn()
	tableRev := table.Revision(txn)
	byID := map[string]*testObject{}
	byRev := map[statedb.Revision]string{}
	valid := 0
	for obj, rev := range table.All(txn) {
		if _, dup := byID[obj.ID]; dup {
			t.Errorf("invariant: %s listed twice", obj.ID)
		}
		byID[obj.ID] = obj
		if other, dup := byRev[rev]; dup {
			t.Errorf("invariant: %s and %s share revision %d", obj.ID, other, rev)
		}
		byRev[rev] = obj.ID
		if rev > tableRev {
			t.Errorf("invariant: %s has revision %d, newer than the table's %d", obj.ID, rev, tableRev)
		}
		if got, grev, ok := table.Get(txn, idIndex.Query(obj.ID)); !ok || got != obj || grev != rev {
			t.Errorf("invariant: Get(%s) = %p, %d, %v; All gave %p at %d", obj.ID, got, grev, ok, obj, rev)
		}
		if obj.Status.Kind.Valid() {
			valid++
		}
	}
	if n := table.NumObjects(txn); n != len(byID) {
		t.Errorf("invariant: NumObjects = %d, All yields %d", n, len(byID))
	}
	indexed := 0
	for _, kind := range []reconciler.StatusKind{reconciler.StatusKindPending, reconciler.StatusKindRefreshing, reconciler.StatusKindDone, reconciler.StatusKindError, reconciler.StatusKindUnset} {
		for obj := range table.List(txn, statusIndex.Query(kind)) {
			indexed++
			if obj.Status.Kind != kind {
				t.Errorf("invariant: %s is indexed as %s but its status is %s", obj.ID, kind, obj.Status.Kind)
			}
			if byID[obj.ID] != obj {
				t.Errorf("invariant: the status index holds %s (%p), the table %p", obj.ID, obj, byID[obj.ID])
			}
		}
	}
	if indexed != valid {
		t.Errorf("invariant: %d objects under the status index's kinds, %d objects with a valid kind", indexed, valid)
	}
}

// knownBug ends a test whose case falls short of "works or fails with a
// clear error": skipped with the diagnosis, or failed under CONVERGE_BUGS.
func knownBug(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CONVERGE_BUGS") != "" {
		t.Fatalf("BUG: %s", msg)
	}
	t.Skipf("BUG: %s (CONVERGE_BUGS=1 go test -run '%s' ./reconciler fails on it)", msg, runPattern(t.Name()))
}

// nilSafeError is an error type whose Error method expects a nil receiver.
type nilSafeError struct{ msg string }

func (e *nilSafeError) Error() string {
	if e == nil {
		return "nilSafeError(nil)"
	}
	return e.msg
}

// derefError is an ordinary error type: its Error method reads the
// receiver, so a typed nil *derefError panics when asked its message.
type derefError struct{ msg string }

func (e *derefError) Error() string { return e.msg }

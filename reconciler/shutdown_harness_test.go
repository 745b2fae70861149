package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// The shutdown tests' target and harness (shutdown_test.go).

// stopOps blocks the operations on the keys it is told to, and records
// every operation it sees against the moments Stop was called and
// returned.
type stopOps struct {
	inner *testOps

	// blocks reports whether key's operations block until their context
	// ends; with ignoreCtx they then keep blocking until release closes.
	blocks    func(key string) bool
	ignoreCtx bool
	release   chan struct{}

	started chan string // every operation's key, as it starts

	stopCalled   atomic.Bool
	stopReturned atomic.Bool

	mu  sync.Mutex
	ops []stopRecord
}

// stopRecord is what one operation saw.
type stopRecord struct {
	key               string
	afterStopCalled   bool
	afterStopReturned bool
	ctxErr            error // the context's error when the operation returned
}

func newStopOps(target *fake.Target, blocks func(string) bool) *stopOps {
	return &stopOps{
		inner:   &testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }},
		blocks:  blocks,
		release: make(chan struct{}),
		started: make(chan string, 1000),
	}
}

func (o *stopOps) run(ctx context.Context, key string, op func(context.Context) error) error {
	rec := stopRecord{key: key, afterStopCalled: o.stopCalled.Load(), afterStopReturned: o.stopReturned.Load()}
	o.started <- key
	defer func() {
		rec.ctxErr = ctx.Err()
		o.mu.Lock()
		o.ops = append(o.ops, rec)
		o.mu.Unlock()
	}()
	if !o.blocks(key) {
		return op(ctx)
	}
	<-ctx.Done()
	if o.ignoreCtx {
		<-o.release
	}
	// Report success: tempting the reconciler to commit Done after the
	// stop has begun.
	return nil
}

// records returns what the operations saw so far.
func (o *stopOps) records() []stopRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.ops)
}

func (o *stopOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	return o.run(ctx, obj.ID, func(ctx context.Context) error { return o.inner.Update(ctx, txn, rev, obj) })
}

func (o *stopOps) Delete(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	return o.run(ctx, obj.ID, func(ctx context.Context) error { return o.inner.Delete(ctx, txn, rev, obj) })
}

func (o *stopOps) Prune(ctx context.Context, txn statedb.ReadTxn, objs iter.Seq2[*testObject, statedb.Revision]) error {
	return o.inner.Prune(ctx, txn, objs)
}

// UpdateBatch behaves as a careful batch implementation does: once its
// context ends it starts no further entry.
func (o *stopOps) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	eachEntry(ctx, txn, batch, unlessStopped(o.Update))
}

func (o *stopOps) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	eachEntry(ctx, txn, batch, unlessStopped(o.Delete))
}

// unlessStopped runs op only while its context lasts, and otherwise fails
// with the context's error.
func unlessStopped(op objectOp) objectOp {
	return func(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		return op(ctx, txn, rev, obj)
	}
}

// stopHarness is one hive with a reconciler over stopOps.
type stopHarness struct {
	t   *testing.T
	f   *fixture
	r   reconciler.Reconciler[*testObject]
	ops *stopOps
}

type stopConfig struct {
	concurrency int
	batch       bool
	timeout     time.Duration
}

// startStopHarness starts a hive, fills the table with objs (as they are,
// statuses included), marks it initialized and constructs the reconciler.
func startStopHarness(t *testing.T, ops *stopOps, sc stopConfig, objs []*testObject) *stopHarness {
	t.Helper()
	f := newFixture(t)
	// The reconciler is made before the hive starts, as a cell.Invoke
	// makes it: it learns the hive's stop deadline.
	if err := f.hive.Populate(f.log); err != nil {
		t.Fatalf("hive populate: %s", err)
	}
	f.load(objs)
	cfg := testConfig(f, ops, reconciler.Config[*testObject]{
		Concurrency:      sc.concurrency,
		OperationTimeout: sc.timeout,
		RetryBackoffMin:  time.Millisecond,
		RetryBackoffMax:  10 * time.Millisecond,
		// No full reconciliation: no Prune joins the operations under
		// test, and none waits for those that ignore their context.
		FullReconciliationInterval: reconciler.Off,
	})
	if sc.batch {
		cfg.BatchOperations = ops
	}
	r, err := reconciler.New(cfg, f.params)
	if err != nil {
		t.Fatalf("reconciler.New: %s", err)
	}
	if err := f.hive.Start(f.log, context.Background()); err != nil {
		t.Fatalf("hive start: %s", err)
	}
	return &stopHarness{t: t, f: f, r: r, ops: ops}
}

// insert writes objs in one transaction.
func (h *stopHarness) insert(objs ...*testObject) {
	wtxn := h.f.db.WriteTxn(h.f.table)
	for _, obj := range objs {
		if _, _, err := h.f.table.Insert(wtxn, obj); err != nil {
			h.t.Fatalf("insert: %s", err)
		}
	}
	wtxn.Commit()
}

// settle waits until every change so far is reconciled and every object
// is Done.
func (h *stopHarness) settle() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := h.f.waitReconciled(ctx, h.r, true); err != nil {
		h.t.Fatalf("not reconciled: %s\n%s", err, h.dump())
	}
}

// waitStarted waits for n operations to start and returns their keys.
func (h *stopHarness) waitStarted(n int) []string {
	h.t.Helper()
	var keys []string
	timeout := time.After(5 * time.Second)
	for len(keys) < n {
		select {
		case k := <-h.ops.started:
			keys = append(keys, k)
		case <-timeout:
			h.t.Fatalf("only %d of %d operations started: %v; reconciler status: %+v\ntable:\n%s", len(keys), n, keys, h.r.Status(), h.dump())
		}
	}
	return keys
}

// stop stops the hive with a deadline and reports Stop's error.
func (h *stopHarness) stop(within time.Duration) error {
	h.ops.stopCalled.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- h.f.hive.Stop(h.f.log, ctx) }()
	select {
	case err := <-done:
		h.ops.stopReturned.Store(true)
		return err
	case <-time.After(within + 5*time.Second):
		h.t.Fatalf("hive.Stop did not return within %s of its deadline", 5*time.Second)
		return nil
	}
}

// tableState is a snapshot of the table: each object's value, status and
// revision, and the table's revision.
type tableState struct {
	rev  statedb.Revision
	objs map[string]string
}

func (h *stopHarness) state() tableState {
	txn := h.f.db.ReadTxn()
	s := tableState{rev: h.f.table.Revision(txn), objs: map[string]string{}}
	for obj, rev := range h.f.table.All(txn) {
		s.objs[obj.ID] = fmt.Sprintf("%s %s rev=%d", obj.Value, obj.Status.Kind, rev)
	}
	return s
}

// objects returns the table's objects, cloned, sorted by key.
func (h *stopHarness) objects() []*testObject {
	var objs []*testObject
	for obj := range h.f.table.All(h.f.db.ReadTxn()) {
		objs = append(objs, obj.Clone())
	}
	return objs
}

func (h *stopHarness) dump() string {
	s := h.state()
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(s.objs)) {
		fmt.Fprintf(&b, "  %s: %s\n", k, s.objs[k])
	}
	return b.String()
}

func pendingObjects(prefix string, n int) []*testObject {
	objs := make([]*testObject, n)
	for i := range objs {
		objs[i] = &testObject{ID: fmt.Sprintf("%s%02d", prefix, i), Value: "v1", Status: reconciler.StatusPending()}
	}
	return objs
}

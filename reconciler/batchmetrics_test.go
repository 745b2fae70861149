package reconciler_test

import (
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// entryRecorder counts batch calls and batch entries by result.
type entryRecorder struct {
	reconciler.NopMetrics
	mu      sync.Mutex
	calls   map[reconciler.Result]int
	entries map[reconciler.Result]int
}

func (m *entryRecorder) Reconciler(reconciler.ReconcilerID) reconciler.ReconcilerMetrics { return m }

func (m *entryRecorder) Operation(op reconciler.Op, result reconciler.Result, objects int, _ time.Duration) {
	if op != reconciler.OpUpdateBatch {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[result]++
	if objects != 0 {
		m.entries["objects-on-the-call"] += objects
	}
}

func (m *entryRecorder) BatchEntries(op reconciler.Op, result reconciler.Result, n int) {
	if op != reconciler.OpUpdateBatch {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[result] += n
}

// TestBatchEntriesByResult: a batch with one failing entry is one call with
// the worst result, and its entries are counted under their own results.
func TestBatchEntriesByResult(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)

	rec := &entryRecorder{calls: map[reconciler.Result]int{}, entries: map[reconciler.Result]int{}}
	target := f.target("")
	ops := &testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }}
	r, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{
		BatchOperations:            ops,
		RoundRateLimiter:           rate.NewLimiter(rate.Inf, 1),
		RetryBackoffMin:            time.Millisecond,
		RetryBackoffMax:            time.Millisecond,
		FullReconciliationInterval: reconciler.Off,
		Metrics:                    rec,
	}), f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.markInit()

	target.SetFault("2", fake.Fault{Mode: fake.ModeError, Count: 1})
	insert(t, f,
		&testObject{ID: "1", Status: reconciler.StatusPending()},
		&testObject{ID: "2", Status: reconciler.StatusPending()},
		&testObject{ID: "3", Status: reconciler.StatusPending()})
	if err := f.waitReconciled(ctx, r, true); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// One batch of three (1 error) and the retry of object 2 (ok).
	if rec.calls[reconciler.ResultError] != 1 || rec.calls[reconciler.ResultOK] != 1 {
		t.Errorf("batch calls by result %v, want one error and one ok", rec.calls)
	}
	if rec.entries[reconciler.ResultOK] != 3 || rec.entries[reconciler.ResultError] != 1 || len(rec.entries) != 2 {
		t.Errorf("batch entries by result %v, want ok=3 error=1", rec.entries)
	}
}

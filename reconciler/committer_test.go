package reconciler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler"
)

// gatedOps counts Updates, holds the first one until gate is closed, and
// closes reached when the count gets to goal.
type gatedOps struct {
	testOps
	mu      sync.Mutex
	n, goal int
	entered chan struct{} // closed when the first Update starts
	gate    chan struct{} // the first Update returns once this is closed
	reached chan struct{}
}

func (o *gatedOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	o.mu.Lock()
	o.n++
	first, last := o.n == 1, o.n == o.goal
	o.mu.Unlock()
	if first {
		close(o.entered)
		<-o.gate
	}
	if last {
		close(o.reached)
	}
	return o.testOps.Update(ctx, txn, rev, obj)
}

// TestCommitPipelined checks that the writes of a round do not hold up the
// next rounds: while someone else holds the table's write lock, the
// reconciler cannot write the statuses of its first round, yet it goes on
// and runs the operations of the next two (one round's writes are out,
// one is queued, one round's results wait). Nothing is written while the
// lock is held, and everything lands once it is released. It covers both
// the inline mode (Concurrency 1) and workers, with no round limiter and
// with one that lets the next round start a microsecond after the last:
// a round that outlasts the limiter's interval is committed overlapped
// with the next, as in a bulk load.
func TestCommitPipelined(t *testing.T) {
	for _, concurrency := range []int{1, 4} {
		for _, limit := range []rate.Limit{rate.Inf, 1e6} {
			t.Run(fmt.Sprintf("concurrency=%d/rounds=%v", concurrency, limit), func(t *testing.T) {
				testCommitPipelined(t, concurrency, limit)
			})
		}
	}
}

func testCommitPipelined(t *testing.T, concurrency int, limit rate.Limit) {
	const (
		roundSize = 10
		rounds    = 3
	)
	f, ctx := startFixture(t, 20*time.Second)
	ops := &gatedOps{
		testOps: testOps{target: f.target(""), getStatus: func(o *testObject) reconciler.Status { return o.Status }},
		goal:    roundSize * rounds,
		entered: make(chan struct{}),
		gate:    make(chan struct{}),
		reached: make(chan struct{}),
	}
	r, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{
		Concurrency:      concurrency,
		RoundSize:        roundSize,
		RoundRateLimiter: rate.NewLimiter(limit, 1),
		// A refresh pass writes from the loop itself, and would wait for
		// the lock there.
		FullReconciliationInterval: reconciler.Off,
		RefreshInterval:            reconciler.Off,
	}), f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.markInit()

	wtxn := f.db.WriteTxn(f.table)
	for i := range roundSize * rounds {
		f.table.Insert(wtxn, &testObject{ID: fmt.Sprintf("%03d", i), Status: reconciler.StatusPending()})
	}
	wtxn.Commit()

	// Take the table's write lock while the first round's first
	// operation runs, so the round's writes must wait for it.
	select {
	case <-ops.entered:
	case <-ctx.Done():
		t.Fatal("no Update started")
	}
	held := f.db.WriteTxn(f.table)
	close(ops.gate)
	select {
	case <-ops.reached:
	case <-ctx.Done():
		ops.mu.Lock()
		n := ops.n
		ops.mu.Unlock()
		held.Abort()
		t.Fatalf("%d Updates ran while the first round's writes waited for the lock, want %d", n, roundSize*rounds)
	}
	// Nothing can have been written: we hold the lock.
	for obj := range f.table.All(f.db.ReadTxn()) {
		if obj.Status.Kind != reconciler.StatusKindPending {
			t.Errorf("object %s is %s while the write lock is held", obj.ID, obj.Status.Kind)
		}
	}
	held.Abort()

	if err := f.waitReconciled(ctx, r, true); err != nil {
		t.Fatal(err)
	}
	n := 0
	for obj := range f.table.All(f.db.ReadTxn()) {
		n++
		if obj.Status.Kind != reconciler.StatusKindDone {
			t.Errorf("object %s is %s, want Done", obj.ID, obj.Status.Kind)
		}
	}
	if n != roundSize*rounds {
		t.Errorf("%d objects, want %d", n, roundSize*rounds)
	}
	if st := r.Status(); st.Waiting != 0 {
		t.Errorf("Status().Waiting = %d after reconciliation, want 0", st.Waiting)
	}
}

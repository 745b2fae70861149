package reconciler_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler"
)

// orderedOps wraps testOps and checks, per key, that the versions applied
// to the target never go backwards: a newer revision of an object is never
// applied before an older one, and an older never after a newer.
type orderedOps struct {
	testOps
	mu       sync.Mutex
	applied  map[string]int
	problems []string
}

func (o *orderedOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	err := o.testOps.Update(ctx, txn, rev, obj)
	if err != nil {
		return err
	}
	v, _ := strconv.Atoi(obj.Value)
	o.mu.Lock()
	defer o.mu.Unlock()
	if last, ok := o.applied[obj.ID]; ok && v < last {
		o.problems = append(o.problems, fmt.Sprintf("key %s: version %d applied after %d", obj.ID, v, last))
	}
	o.applied[obj.ID] = v
	return nil
}

// TestConcurrencyPerKeyOrder runs Concurrency 16 against a target with
// random latency while every key is rewritten many times: no two operations
// on one key may overlap, versions must never go backwards, and the target
// must end with the latest desired value of every key.
func TestConcurrencyPerKeyOrder(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprintf("batch=%v", batch), func(t *testing.T) {
			testConcurrencyPerKeyOrder(t, batch)
		})
	}
}

func testConcurrencyPerKeyOrder(t *testing.T, batch bool) {
	const (
		keys     = 64
		versions = 40
	)
	f, ctx := startFixture(t, time.Minute)

	target := f.target("")
	latencyRng := rand.New(rand.NewPCG(3, 4))
	var latencyMu sync.Mutex
	target.SetLatency(func() time.Duration {
		latencyMu.Lock()
		defer latencyMu.Unlock()
		// Mostly quick, sometimes slow: the slow ones are still in flight
		// when the others are committed and their keys change again.
		if latencyRng.IntN(10) == 0 {
			return 15*time.Millisecond + time.Duration(latencyRng.IntN(10000))*time.Microsecond
		}
		return time.Duration(latencyRng.IntN(1000)) * time.Microsecond
	})
	rng := rand.New(rand.NewPCG(1, 2)) // the writer's
	ops := &orderedOps{
		testOps: testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }},
		applied: map[string]int{},
	}
	cfg := testConfig(f, ops, reconciler.Config[*testObject]{
		Concurrency:      16,
		RoundSize:        40, // smaller than the keys: rounds overlap with work in flight
		RoundRateLimiter: rate.NewLimiter(rate.Inf, 1),
		RetryBackoffMin:  time.Millisecond,
		RetryBackoffMax:  5 * time.Millisecond,
	})
	if batch {
		cfg.BatchOperations = ops
	}
	r, err := reconciler.New(cfg, f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.markInit()

	// Rewrite every key many times, in small transactions with random
	// pauses, so changes arrive while older revisions are in flight.
	for v := 1; v <= versions; v++ {
		wtxn := f.db.WriteTxn(f.table)
		for k := range keys {
			if rng.IntN(3) == 0 && v < versions {
				continue // not every key every time, but all at the end
			}
			obj := &testObject{ID: strconv.Itoa(k), Value: strconv.Itoa(v), Status: reconciler.StatusPending()}
			if _, _, err := f.table.Insert(wtxn, obj); err != nil {
				t.Fatal(err)
			}
		}
		wtxn.Commit()
		time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond) // pacing the writer, not synchronization
	}

	if err := f.waitReconciled(ctx, r, true); err != nil {
		t.Fatal(err)
	}
	if o := target.Overlaps(); len(o) > 0 {
		t.Fatalf("operations overlapped on keys %v", o)
	}
	ops.mu.Lock()
	problems := ops.problems
	ops.mu.Unlock()
	if len(problems) > 0 {
		t.Fatalf("versions went backwards: %v", problems)
	}
	state := target.State()
	for k := range keys {
		if got, want := state[strconv.Itoa(k)], strconv.Itoa(versions); got != want {
			t.Errorf("key %d: target has version %q, want %q", k, got, want)
		}
	}
	if len(state) != keys {
		t.Errorf("target has %d keys, want %d", len(state), keys)
	}
}

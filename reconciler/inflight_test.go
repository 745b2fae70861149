package reconciler_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// gaugeRecorder keeps the latest gauges a reconciler reported.
type gaugeRecorder struct {
	reconciler.NopMetrics
	mu     sync.Mutex
	gauges reconciler.Gauges
}

func (m *gaugeRecorder) Reconciler(reconciler.ReconcilerID) reconciler.ReconcilerMetrics { return m }

func (m *gaugeRecorder) Gauges(g reconciler.Gauges) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gauges = g
}

// latest returns the gauges reported last.
func (m *gaugeRecorder) latest() reconciler.Gauges {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gauges
}

// batchOf runs a batch's entries one after the other on its Operations.
type batchOf struct {
	reconciler.Operations[*testObject]
}

func (b batchOf) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	eachEntry(ctx, txn, batch, b.Update)
}

func (b batchOf) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	eachEntry(ctx, txn, batch, b.Delete)
}

// TestInFlightIsRunning: InFlight, in Status() and in the gauges, counts
// the operations running, at most Concurrency, not the work handed out
// and waiting for a worker (that is in Waiting).
func TestInFlightIsRunning(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(fmt.Sprint("batch=", batch), func(t *testing.T) {
			rec := &gaugeRecorder{}
			sleepy := &sleepyOps{d: time.Hour}
			inBubble(t,
				func(cfg *reconciler.Config[*testObject]) {
					cfg.Concurrency, cfg.Metrics = 1, rec
					sleepy.Operations = cfg.Operations
					cfg.Operations = sleepy
					if batch {
						cfg.BatchOperations = batchOf{sleepy}
					}
				},
				func(f *fixture, ops *timedOps) {
					for i := range 20 {
						insert(t, f, pendingObject(fmt.Sprintf("k%02d", i), "v"))
						time.Sleep(time.Millisecond) // each its own round: with batches, 20 batches
					}
					synctest.Wait()
					r, _ := f.reconciler("")
					s := r.Status()
					g := rec.latest()
					if s.InFlight != 1 || g.InFlight != 1 || s.Waiting != 20 {
						t.Fatalf("Status().InFlight %d, gauge %d, Waiting %d with one operation hung and 19 behind it: want 1, 1 and 20",
							s.InFlight, g.InFlight, s.Waiting)
					}
				})
		})
	}
}

// TestInFlightLoneOperation: an operation handed out to an idle
// reconciler counts in InFlight, in Status() and in the gauges, and
// Explain says Running, once the reconciler sleeps, though nothing wakes
// it when the operation starts (it hangs): the report made as it was
// handed to an idle worker says so.
func TestInFlightLoneOperation(t *testing.T) {
	for _, concurrency := range []int{1, 4} {
		t.Run(fmt.Sprint("concurrency=", concurrency), func(t *testing.T) {
			rec := &gaugeRecorder{}
			sleepy := &sleepyOps{d: time.Hour}
			inBubble(t,
				func(cfg *reconciler.Config[*testObject]) {
					cfg.Concurrency, cfg.Metrics = concurrency, rec
					sleepy.Operations = cfg.Operations
					cfg.Operations = sleepy
				},
				func(f *fixture, ops *timedOps) {
					insert(t, f, pendingObject("k", "v"))
					synctest.Wait()
					r, _ := f.reconciler("")
					s := r.Status()
					g := rec.latest()
					if s.InFlight != 1 || g.InFlight != 1 || s.Waiting != 1 {
						t.Fatalf("Status().InFlight %d, gauge %d, Waiting %d with its one operation running: want 1, 1 and 1",
							s.InFlight, g.InFlight, s.Waiting)
					}
					e, err := r.Explain(context.Background(), []byte("k"))
					if err != nil || e.State != reconciler.KeyRunning || e.Since.IsZero() {
						t.Fatalf("Explain(k) = %v, %v with its operation running: want Running, since it started", e, err)
					}
				})
		})
	}
}

// TestExplainRunningSince: Explain's Since for a Running key is when its
// operation started on a worker, not when it was handed out.
func TestExplainRunningSince(t *testing.T) {
	sleepy := &sleepyOps{d: 5 * time.Millisecond}
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			sleepy.Operations = cfg.Operations
			cfg.Operations = sleepy
		},
		func(f *fixture, ops *timedOps) {
			start := time.Now()
			insert(t, f, pendingObject("a", "v"), pendingObject("b", "v"), pendingObject("c", "v"))
			time.Sleep(11 * time.Millisecond) // c's Update started at 10ms
			synctest.Wait()
			r, _ := f.reconciler("")
			e, err := r.Explain(context.Background(), []byte("c"))
			if err != nil || e.State != reconciler.KeyRunning || e.Since.Sub(start) != 10*time.Millisecond {
				t.Fatalf("Explain(c) = %v: %s, Since %v after the write: want Running since its Update started, 10ms", err, e, e.Since.Sub(start))
			}
		})
}

// TestExplainResultIn: a key whose Update returned, its result waiting to
// be taken with the round's others, is Committing, not Running.
func TestExplainResultIn(t *testing.T) {
	var ops *orderOps
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			ops = newOrderOps() // in the bubble: its channel blocks durably
			cfg.Concurrency, cfg.Operations = 2, ops
		},
		func(f *fixture, _ *timedOps) {
			defer close(ops.release)
			insert(t, f, objs("1ms", "fast")...)
			insert(t, f, objs("hang", "slow")...)
			time.Sleep(2 * time.Millisecond)
			synctest.Wait()
			r, _ := f.reconciler("")
			e, err := r.Explain(context.Background(), []byte("fast"))
			if err != nil || e.State != reconciler.KeyCommitting {
				t.Fatalf("Explain(fast) after its Update returned = %v: %s", err, e)
			}
			e, err = r.Explain(context.Background(), []byte("slow"))
			if err != nil || e.State != reconciler.KeyRunning {
				t.Fatalf("Explain(slow) = %v: %s", err, e)
			}
		})
}

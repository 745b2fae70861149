package reconciler

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoffSaturates(t *testing.T) {
	b := newBackoff(100*time.Millisecond, time.Minute)
	for _, failures := range []int{1, 2, 10, 11, 63, 64, 65, 1000, math.MaxInt} {
		d := b.nominal(failures)
		if d <= 0 || d > time.Minute {
			t.Fatalf("nominal(%d) = %s, want within (0, 1m]", failures, d)
		}
		if failures >= 11 && d != time.Minute {
			t.Fatalf("nominal(%d) = %s, want the 1m cap", failures, d)
		}
	}
	if d := b.nominal(1); d != 100*time.Millisecond {
		t.Fatalf("nominal(1) = %s, want the minimum", d)
	}
	if d := b.nominal(4); d != 800*time.Millisecond {
		t.Fatalf("nominal(4) = %s, want 800ms", d)
	}

	// Extreme bounds do not overflow either.
	huge := newBackoff(time.Duration(math.MaxInt64/3), time.Duration(math.MaxInt64))
	for _, failures := range []int{1, 2, 3, 64, math.MaxInt} {
		if d := huge.nominal(failures); d <= 0 {
			t.Fatalf("huge nominal(%d) = %s overflowed", failures, d)
		}
		if d := huge.delay(failures); d <= 0 {
			t.Fatalf("huge delay(%d) = %s overflowed", failures, d)
		}
	}
}

func TestBackoffEqualJitter(t *testing.T) {
	b := newBackoff(time.Second, 8*time.Second)
	for _, r := range []func(int64) int64{
		func(int64) int64 { return 0 },
		func(n int64) int64 { return n - 1 },
		rand.Int64N,
	} {
		b.rand = r
		for failures := 1; failures < 70; failures++ {
			nominal := b.nominal(failures)
			if d := b.delay(failures); d < nominal/2 || d > nominal {
				t.Fatalf("delay(%d) = %s, want within [%s, %s]", failures, d, nominal/2, nominal)
			}
		}
	}
}

// TestRetryQueueModel drives the queue with random operations and checks it
// against a plain map: one entry per key, pops in due order, the low
// watermark is the least origRev.
func TestRetryQueueModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	rq := newRetryQueue[int]()
	model := map[string]*retryEntry[int]{}
	base := time.Unix(0, 0)
	now := base
	for step := range 20000 {
		key := fmt.Sprint(rng.IntN(200))
		switch rng.IntN(4) {
		case 0, 1:
			e := &retryEntry[int]{key: key, origRev: uint64(rng.IntN(1000)), due: base.Add(time.Duration(rng.IntN(10000)) * time.Millisecond)}
			rq.add(e)
			model[key] = e
		case 2:
			rq.remove(key)
			delete(model, key)
		case 3:
			now = now.Add(time.Duration(rng.IntN(100)) * time.Millisecond)
			if e, ok := rq.popDue(now); ok {
				want, ok := model[e.key]
				if !ok || want != e {
					t.Fatalf("step %d: popped %q, not in the model", step, e.key)
				}
				for _, m := range model {
					if m.due.Before(e.due) {
						t.Fatalf("step %d: popped due %s before %s", step, e.due, m.due)
					}
				}
				if e.due.After(now) {
					t.Fatalf("step %d: popped an entry due in the future", step)
				}
				delete(model, e.key)
			}
		}
		if rq.len() != len(model) {
			t.Fatalf("step %d: len %d, model %d", step, rq.len(), len(model))
		}
		low, ok := rq.lowWatermark()
		if ok != (len(model) > 0) {
			t.Fatalf("step %d: lowWatermark ok=%v with %d entries", step, ok, len(model))
		}
		for _, m := range model {
			if m.origRev < low {
				t.Fatalf("step %d: low watermark %d above an entry's %d", step, low, m.origRev)
			}
		}
	}
}

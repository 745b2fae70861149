package reconciler_test

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// TestBreakerHoldsRetriesWhileTargetIsDown: when every object fails the
// same way, retries go one at a time (spaced by the backoff) instead of
// every object on its own schedule; the first success releases them all.
func TestBreakerHoldsRetriesWhileTargetIsDown(t *testing.T) {
	const objects = 200
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RetryBackoffMin, cfg.RetryBackoffMax = 100*time.Millisecond, time.Second
		},
		func(f *fixture, ops *timedOps) {
			target := f.target("")
			target.SetFault("*", fake.Fault{Mode: fake.ModeDown})
			var objs []*testObject
			for i := range objects {
				objs = append(objs, &testObject{ID: "k" + strconv.Itoa(i), Value: "v", Status: reconciler.StatusPending()})
			}
			insert(t, f, objs...)
			synctest.Wait()
			first := len(ops.attempts())
			if first != objects {
				t.Fatalf("%d first attempts, want %d", first, objects)
			}

			// Ten seconds of outage: without the breaker every object
			// would retry about 13 times (100ms doubling to 1s).
			time.Sleep(10 * time.Second)
			synctest.Wait()
			during := len(ops.attempts()) - first
			// A canary at a time, at most four a second once the
			// backoff has grown: about 40.
			if during > 45 {
				t.Fatalf("%d retries in 10s of outage, want a canary at a time (at most 45)", during)
			}
			if during == 0 {
				t.Fatalf("no canary in 10s of outage")
			}

			// Heal: the next canary succeeds and the rest follow at once.
			target.Heal("")
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if got := len(target.State()); got != objects {
				t.Fatalf("%d objects in the target 2s after healing, want %d", got, objects)
			}
			t.Logf("attempts: %d first, %d during 10s of outage, %d in all", first, during, len(ops.attempts()))
		})
}

// TestBreakerIgnoresDistinctErrors: objects failing each for a reason of its
// own keep their own retry schedules.
func TestBreakerIgnoresDistinctErrors(t *testing.T) {
	const objects = 100
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RetryBackoffMin, cfg.RetryBackoffMax = 100*time.Millisecond, 100*time.Millisecond
		},
		func(f *fixture, ops *timedOps) {
			target := f.target("")
			var objs []*testObject
			for i := range objects {
				key := "k" + strconv.Itoa(i)
				target.SetFault(key, fake.Fault{Mode: fake.ModeError}) // "update(kN): failure"
				objs = append(objs, &testObject{ID: key, Value: "v", Status: reconciler.StatusPending()})
			}
			insert(t, f, objs...)
			time.Sleep(time.Second)
			synctest.Wait()
			// Every object retries every 50-100ms: well over 5 attempts each.
			if n := len(ops.attempts()); n < objects*5 {
				t.Fatalf("%d attempts in 1s, want every object retried on its own schedule (>= %d)", n, objects*5)
			}
		})
}

package reconciler_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// TestStaleCopyPutBack: another writer puts back a copy of the object
// from before the reconciler's Error write (statedb's reconciler does so
// on a shared StatusSet when it retries), while the retry runs: the table
// holds the Pending that asked again, with the same ID. The retry's result
// answers it and is written; the object is not left Pending with nothing
// outstanding.
func TestStaleCopyPutBack(t *testing.T) {
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Second, time.Second
		},
		func(f *fixture, _ *timedOps) {
			tgt := f.target("")
			tgt.SetFault("x", fake.Fault{Mode: fake.ModeError, Count: 1})
			orig := &testObject{ID: "x", Value: "v", Status: reconciler.StatusPending()}
			insert(t, f, orig.Clone())
			synctest.Wait()
			if got := f.get("x").Status.Kind; got != reconciler.StatusKindError {
				t.Fatalf("x is %s after its first attempt, want Error", got)
			}

			// The retry runs, and blocks; meanwhile the old copy is put
			// back, and read.
			tgt.SetFault("x", fake.Fault{Mode: fake.ModeStuck})
			time.Sleep(2 * time.Second)
			synctest.Wait()
			insert(t, f, orig.Clone())
			synctest.Wait()
			tgt.Heal("x")
			r := settled(t, f)
			if got := f.get("x").Status.Kind; got != reconciler.StatusKindDone {
				t.Errorf("x is %s, want Done: the retry answered the request the table holds", got)
			}
			if o := r.Status().Objects; o != (reconciler.ObjectCounts{Done: 1}) {
				t.Errorf("Status().Objects = %+v, want 1 Done", o)
			}
		})
}

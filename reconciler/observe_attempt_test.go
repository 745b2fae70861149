package reconciler_test

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// decliner is a recorder that declines (AttemptFilter) every attempt on
// key "b" and the first attempt on key "c", and keeps what it was asked.
type decliner struct {
	recorder
	askMu sync.Mutex
	asked []reconciler.Attempt
}

func (d *decliner) WantsAttempt(a reconciler.Attempt) bool {
	d.askMu.Lock()
	d.asked = append(d.asked, a)
	d.askMu.Unlock()
	return !(a.Key == "b" || a.Key == "c" && a.Attempt == 1)
}

// TestAttemptFilterDeclines: an observer that declines an attempt is told
// none of its started, finished and committed events (its read, ready and
// failed still come), and all of an attempt it wants; another observer
// of the same reconciler, without the interface, is told everything. So
// with one object per operation and in batches.
func TestAttemptFilterDeclines(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := "one"
		if batch {
			name = "batch"
		}
		t.Run(name, func(t *testing.T) {
			f, ctx := startFixture(t, time.Minute)
			dec, all := &decliner{}, &recorder{}
			cfg := observedConfig(f, "obs", dec, all)
			if batch {
				cfg.BatchOperations = cfg.Operations.(reconciler.BatchOperations[*testObject])
			}
			r, err := reconciler.New(cfg, f.params)
			if err != nil {
				t.Fatal(err)
			}
			f.target("obs").SetFault("c", fake.Fault{Mode: fake.ModeError, Count: 1})
			f.load(nil)
			insertPending(f, &testObject{ID: "a", Value: "1"})
			insertPending(f, &testObject{ID: "b", Value: "1"})
			insertPending(f, &testObject{ID: "c", Value: "1"})
			settleObserved(t, ctx, f, r)

			life := []string{"read", "ready", "started", "finished", "committed"}
			for key, want := range map[string][]string{
				"a": life,
				"b": {"read", "ready"},
				"c": append([]string{"read", "ready", "failed"}, life...),
			} {
				if kinds, _ := dec.of(key); !slices.Equal(kinds, want) {
					t.Errorf("the decliner was told of %s: %v, want %v", key, kinds, want)
				}
			}
			for key, want := range map[string][]string{
				"a": life, "b": life,
				"c": append(append(slices.Clone(life), "failed"), life...),
			} {
				if kinds, _ := all.of(key); !slices.Equal(kinds, want) {
					t.Errorf("the other observer was told of %s: %v, want %v", key, kinds, want)
				}
			}
			dec.askMu.Lock()
			defer dec.askMu.Unlock()
			if len(dec.asked) != 4 {
				t.Fatalf("asked %d times, want 4 (a, b, c twice): %+v", len(dec.asked), dec.asked)
			}
			for _, a := range dec.asked {
				if a.Revision == 0 || a.Deleted || a.Why == 0 ||
					(a.Op != reconciler.OpUpdate && a.Op != reconciler.OpUpdateBatch) ||
					(a.Key == "c" && a.Attempt == 2) != (a.Why == reconciler.ReadRetry) {
					t.Errorf("asked %+v", a)
				}
			}
		})
	}
}

package reconciler

import (
	"errors"
	"log/slog"
	"testing"
	"time"
)

// countingObserver counts events and keeps nothing.
type countingObserver struct{ n int }

func (c *countingObserver) Observe(Event) { c.n++ }

// TestObserveHooksAllocateNothing: without observers every hook is a nil
// check that allocates nothing; with an observer that keeps nothing,
// telling it allocates nothing either (an Event is passed by value).
func TestObserveHooksAllocateNothing(t *testing.T) {
	r := &request[int]{key: "k", state: reqStateCount, detail: &detail[int]{}}
	v := &verdict[int]{outcome: outcome[int]{r: r, op: OpUpdate}}
	w := &statusWrite[int]{}
	hooks := func(o *observing[int]) func() {
		return func() {
			o.entered(r, stQueued)
			o.settled(v, w, time.Time{})
			o.failed(r, nil, time.Time{})
		}
	}
	if n := testing.AllocsPerRun(1000, hooks(nil)); n != 0 {
		t.Errorf("hooks without observers: %v allocations per run", n)
	}
	c := &countingObserver{}
	cfg := Config[int]{Observers: []Observer{c}}
	o := newObserving(&cfg, slog.New(slog.DiscardHandler), NopMetrics{})
	if n := testing.AllocsPerRun(1000, hooks(o)); n != 0 {
		t.Errorf("hooks with an observer: %v allocations per run", n)
	}
	if c.n == 0 {
		t.Error("the observer was told nothing")
	}
}

// TestDependencyHooks: the hooks the dependency transitions call tell
// observers blocked (with why) and released, and cost a nil check
// without observers.
func TestDependencyHooks(t *testing.T) {
	r := &request[int]{key: "k", detail: &detail[int]{}}
	var none *observing[int]
	none.blocked(r, errNoDep)
	none.released(r)
	rec := &keptEvents{}
	cfg := Config[int]{Observers: []Observer{rec}}
	o := newObserving(&cfg, slog.New(slog.DiscardHandler), NopMetrics{})
	o.blocked(r, errNoDep)
	o.released(r)
	if len(rec.events) != 2 || rec.events[0].Kind != EventBlocked || rec.events[0].Err != errNoDep ||
		rec.events[1].Kind != EventReleased || rec.events[1].Key != "k" {
		t.Fatalf("events %+v", rec.events)
	}
}

var errNoDep = errors.New("waits for b")

// keptEvents keeps every event.
type keptEvents struct{ events []Event }

func (k *keptEvents) Observe(e Event) { k.events = append(k.events, e) }

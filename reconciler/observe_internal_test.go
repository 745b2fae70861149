package reconciler

import (
	"context"
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

// declineAll counts its events and declines every attempt.
type declineAll struct{ countingObserver }

func (*declineAll) WantsAttempt(Attempt) bool { return false }

// TestDeclinedAttemptBuildsNothing: when the only observer declines an
// attempt, the engine tells it nothing of it, reads no clock for it
// (attempt and finished return zero times) and allocates nothing; an
// observer that wants it is told started, finished and committed.
func TestDeclinedAttemptBuildsNothing(t *testing.T) {
	r := &request[int]{key: "k", state: stBusy, detail: &detail[int]{}}
	en := &opEntry[int]{key: "k", rev: 3}
	d := &declineAll{}
	cfg := Config[int]{Observers: []Observer{d}}
	o := newObserving(&cfg, slog.New(slog.DiscardHandler), NopMetrics{})
	var start, end time.Time
	var declined obsMask
	run := func() {
		start, declined = o.attempt(context.Background(), OpUpdate, en)
		end = o.finished(OpUpdate, en, ResultOK, nil, start, declined)
		v := &verdict[int]{outcome: outcome[int]{r: r, op: OpUpdate, declined: declined}}
		o.settled(v, nil, time.Time{})
	}
	if n := testing.AllocsPerRun(1000, run); n != 0 {
		t.Errorf("a declined attempt: %v allocations", n)
	}
	if d.n != 0 || !start.IsZero() || !end.IsZero() || declined != 1 {
		t.Errorf("a declined attempt: %d events, start %v, end %v, declined %b", d.n, start, end, declined)
	}
	c := &countingObserver{}
	cfg.Observers = []Observer{d, c}
	o = newObserving(&cfg, slog.New(slog.DiscardHandler), NopMetrics{})
	run()
	if d.n != 0 || c.n != 3 || start.IsZero() || end.IsZero() {
		t.Errorf("beside an observer that wants it: %d and %d events, start %v, end %v", d.n, c.n, start, end)
	}
}

// TestAttemptFilterPast64: an observer after the 64th of
// Config.Observers is not asked and gets every attempt.
func TestAttemptFilterPast64(t *testing.T) {
	var cfg Config[int]
	for range maskBits {
		cfg.Observers = append(cfg.Observers, &countingObserver{})
	}
	d := &declineAll{}
	cfg.Observers = append(cfg.Observers, d)
	o := newObserving(&cfg, slog.New(slog.DiscardHandler), NopMetrics{})
	en := &opEntry[int]{key: "k", rev: 3}
	start, declined := o.attempt(context.Background(), OpUpdate, en)
	o.finished(OpUpdate, en, ResultOK, nil, start, declined)
	if declined != 0 || d.n != 2 {
		t.Errorf("the 65th observer, declining: declined %b, told %d events, want 2", declined, d.n)
	}
}

// panicFilter panics when asked about an attempt.
type panicFilter struct{ countingObserver }

func (*panicFilter) WantsAttempt(Attempt) bool { panic("filter") }

// TestAttemptFilterPanicWants: an AttemptFilter that panics is taken to
// want the attempt, and is told it.
func TestAttemptFilterPanicWants(t *testing.T) {
	p := &panicFilter{}
	cfg := Config[int]{Observers: []Observer{p}}
	o := newObserving(&cfg, slog.New(slog.DiscardHandler), NopMetrics{})
	if _, declined := o.attempt(context.Background(), OpUpdate, &opEntry[int]{key: "k"}); declined != 0 || p.n != 1 {
		t.Errorf("declined %b, told %d events", declined, p.n)
	}
}

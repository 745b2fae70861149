package reconciler_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []reconciler.Event
}

func (r *recorder) Observe(e reconciler.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// of returns the kinds of key's events, in order.
func (r *recorder) of(key string) (kinds []string, events []reconciler.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.events {
		if e.Key == key {
			kinds = append(kinds, e.Kind.String())
			events = append(events, e)
		}
	}
	return kinds, events
}

// observedConfig is a per-object reconciler over f's table and target
// name, with fast retries and the observers given.
func observedConfig(f *fixture, name string, obs ...reconciler.Observer) reconciler.Config[*testObject] {
	get := func(o *testObject) reconciler.Status { return o.Status }
	return reconciler.Config[*testObject]{
		Table:              f.table,
		GetObjectStatus:    get,
		SetObjectStatus:    func(o *testObject, st reconciler.Status) *testObject { o.Status = st; return o },
		CloneObject:        (*testObject).Clone,
		Operations:         &testOps{target: f.target(name), getStatus: get},
		Name:               name,
		RoundRateLimiter:   rate.NewLimiter(rate.Inf, 1),
		RetryBackoffMin:    time.Millisecond,
		RetryBackoffMax:    2 * time.Millisecond,
		RefreshInterval:    reconciler.Off,
		RefreshRateLimiter: rate.NewLimiter(rate.Inf, 1),
		Observers:          obs,
	}
}

// settleObserved waits until every change so far is reconciled.
func settleObserved(t *testing.T, ctx context.Context, f *fixture, r reconciler.Reconciler[*testObject]) {
	t.Helper()
	if err := f.waitReconciled(ctx, r, true); err != nil {
		t.Fatal(err)
	}
}

// insertPending writes obj with a Pending status.
func insertPending(f *fixture, obj *testObject) {
	obj.Status = reconciler.StatusPending()
	wtxn := f.db.WriteTxn(f.table)
	if _, _, err := f.table.Insert(wtxn, obj); err != nil {
		f.t.Fatal(err)
	}
	wtxn.Commit()
}

// TestObserverSeesOneKeysLife: a change that fails once and then
// succeeds is told to an observer in order: read, ready, started,
// finished, committed (the Error), failed, then the retry read, ready,
// started, finished and the Done committed, with attempt numbers 1 then
// 2, the worker, and the results.
func TestObserverSeesOneKeysLife(t *testing.T) {
	f, ctx := startFixture(t, time.Minute)
	rec := &recorder{}
	r, err := reconciler.New(observedConfig(f, "obs", rec), f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.target("obs").SetFault("a", fake.Fault{Mode: fake.ModeError, Count: 1})
	f.load(nil)
	insertPending(f, &testObject{ID: "a", Value: "1"})
	settleObserved(t, ctx, f, r)

	kinds, events := rec.of("a")
	want := []string{"read", "ready", "started", "finished", "committed", "failed",
		"read", "ready", "started", "finished", "committed"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("events of a:\n got %v\nwant %v", kinds, want)
	}
	check := func(i int, ok bool, what string) {
		t.Helper()
		if !ok {
			t.Errorf("event %d (%s): %s: %+v", i, kinds[i], what, events[i])
		}
	}
	check(0, events[0].Why == reconciler.ReadChange && events[0].Revision > 0 && !events[0].RequestedAt.IsZero(), "a change's read")
	check(2, events[2].Attempt == 1 && events[2].Worker >= 1 && events[2].Op == reconciler.OpUpdate, "the first attempt")
	check(3, events[3].Result == reconciler.ResultError && events[3].Err != nil, "failed")
	check(4, events[4].Status == reconciler.StatusKindError && events[4].Commit == reconciler.CommitWritten, "its Error written")
	check(5, events[5].Attempt == 1 && events[5].Err != nil && !events[5].Due.IsZero(), "a retry due")
	check(6, events[6].Why == reconciler.ReadRetry && events[6].Attempt == 2, "the retry read")
	check(2, !events[2].QueuedAt.IsZero() && !events[2].QueuedAt.After(events[2].Time) && events[2].Why == reconciler.ReadChange, "queued before, as a change")
	check(8, events[8].Attempt == 2 && events[8].Why == reconciler.ReadRetry, "the second attempt, a retry")
	check(9, events[9].Result == reconciler.ResultOK && events[9].Err == nil, "succeeded")
	check(10, events[10].Status == reconciler.StatusKindDone && events[10].Commit == reconciler.CommitWritten && events[10].Attempt == 2, "Done written")
	for i := 1; i < len(events); i++ {
		check(i, !events[i].Time.Before(events[i-1].Time), "in time order")
	}
}

// TestObserverSeesDeleteAndGivingUp: a delete is read as one, and a
// Permanent failure is given up on after its failure.
func TestObserverSeesDeleteAndGivingUp(t *testing.T) {
	f, ctx := startFixture(t, time.Minute)
	rec := &recorder{}
	r, err := reconciler.New(observedConfig(f, "obs", rec), f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.load(nil)
	insertPending(f, &testObject{ID: "a", Value: "1"})
	settleObserved(t, ctx, f, r)
	wtxn := f.db.WriteTxn(f.table)
	if _, _, err := f.table.Delete(wtxn, &testObject{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	wtxn.Commit()
	if err := f.waitReconciled(ctx, r, false); err != nil {
		t.Fatal(err)
	}
	f.target("obs").SetFault("p", fake.Fault{Mode: fake.ModePermanent})
	insertPending(f, &testObject{ID: "p", Value: "1"})
	if err := f.waitReconciled(ctx, r, false); err != nil {
		t.Fatal(err)
	}

	_, events := rec.of("a")
	var del []string
	for _, e := range events {
		if e.Deleted {
			del = append(del, e.Kind.String())
			if e.Kind == reconciler.EventRead && e.Why != reconciler.ReadDelete {
				t.Errorf("a delete read as %s", e.Why)
			}
		}
	}
	if want := []string{"read", "ready", "started", "finished", "committed"}; !slices.Equal(del, want) {
		t.Errorf("the delete's events: got %v, want %v", del, want)
	}
	kinds, events := rec.of("p")
	if want := []string{"read", "ready", "started", "finished", "committed", "failed", "given-up"}; !slices.Equal(kinds, want) {
		t.Fatalf("a permanent failure's events: got %v, want %v", kinds, want)
	}
	if last := events[len(events)-1]; last.Err == nil || !reconciler.IsPermanent(last.Err) || last.Attempt != 1 {
		t.Errorf("given up: %+v", last)
	}
}

// panicky panics on every event.
type panicky struct{}

func (panicky) Observe(reconciler.Event) { panic("observer bug") }

// TestObserverPanicHarmsNothing: an observer that panics on every event
// neither crashes the engine nor keeps another observer from its events,
// and its panics are counted in the metrics.
func TestObserverPanicHarmsNothing(t *testing.T) {
	f, ctx := startFixture(t, time.Minute)
	rec := &recorder{}
	m := &observerCounts{}
	cfg := observedConfig(f, "obs", panicky{}, rec)
	cfg.Metrics = m
	r, err := reconciler.New(cfg, f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.load(nil)
	insertPending(f, &testObject{ID: "a", Value: "1"})
	settleObserved(t, ctx, f, r)
	kinds, _ := rec.of("a")
	if want := []string{"read", "ready", "started", "finished", "committed"}; !slices.Equal(kinds, want) {
		t.Errorf("the observer after a panicking one: got %v, want %v", kinds, want)
	}
	if got := m.panics(); got < len(kinds) {
		t.Errorf("%d panics counted, want at least %d", got, len(kinds))
	}
}

// TestObserversNilIsAConfigError: a nil observer is refused at New,
// naming the field.
func TestObserversNilIsAConfigError(t *testing.T) {
	f, _ := startFixture(t, time.Minute)
	_, err := reconciler.New(observedConfig(f, "obs", nil), f.params)
	if !errors.Is(err, reconciler.ErrInvalidConfig) || err == nil || !contains(err.Error(), "Config.Observers[0]") {
		t.Fatalf("New with a nil observer: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// observerCounts is a Metrics that counts what observers lost.
type observerCounts struct {
	reconciler.NopMetrics
	mu                  sync.Mutex
	dropped, panicCount int
}

func (m *observerCounts) Reconciler(reconciler.ReconcilerID) reconciler.ReconcilerMetrics { return m }
func (m *observerCounts) ObserverDropped(n int) {
	m.mu.Lock()
	m.dropped += n
	m.mu.Unlock()
}
func (m *observerCounts) ObserverPanicked() {
	m.mu.Lock()
	m.panicCount++
	m.mu.Unlock()
}
func (m *observerCounts) panics() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.panicCount
}
func (m *observerCounts) drops() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

var _ reconciler.ObserverMetrics = (*observerCounts)(nil)

// committedOnly wants only committed events (EventFilter).
type committedOnly struct{ recorder }

func (*committedOnly) Wants(k reconciler.EventKind) bool { return k == reconciler.EventCommitted }

// TestEventFilterGetsOnlyWhatItWants: an observer that implements
// EventFilter is sent only the kinds it wants, while another observer
// of the same reconciler gets every kind.
func TestEventFilterGetsOnlyWhatItWants(t *testing.T) {
	f, ctx := startFixture(t, time.Minute)
	only, all := &committedOnly{}, &recorder{}
	r, err := reconciler.New(observedConfig(f, "obs", only, all), f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.load(nil)
	insertPending(f, &testObject{ID: "a", Value: "1"})
	settleObserved(t, ctx, f, r)
	if kinds, _ := only.of("a"); !slices.Equal(kinds, []string{"committed"}) {
		t.Errorf("the filtered observer got %v", kinds)
	}
	if kinds, _ := all.of("a"); len(kinds) != 5 {
		t.Errorf("the other observer got %v", kinds)
	}
}

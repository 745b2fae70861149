package reconciler_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// realizedRecorder keeps every realization latency reported to it.
type realizedRecorder struct {
	reconciler.NopMetrics
	mu  sync.Mutex
	got []time.Duration
}

func (m *realizedRecorder) Reconciler(reconciler.ReconcilerID) reconciler.ReconcilerMetrics { return m }

func (m *realizedRecorder) Realized(latencies []time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, latencies...)
}

func (m *realizedRecorder) latencies() []time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

// settle waits until every change so far has settled. In a bubble the
// fake clock runs while it waits: to the end of the operations' latency
// and to the retries' due times.
func settle(t *testing.T, f *fixture, r reconciler.Reconciler[*testObject]) {
	t.Helper()
	if err := r.WaitUntilSettled(context.Background(), f.table.Revision(f.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
}

// realizedCheck returns the fixture's reconciler and target, the
// latencies the test expects so far, and check: it waits until everything
// is settled and fails the test unless rec got exactly those latencies.
func realizedCheck(t *testing.T, f *fixture, rec *realizedRecorder) (reconciler.Reconciler[*testObject], *fake.Target, *[]time.Duration, func(step string)) {
	r, err := f.reconciler("")
	if err != nil {
		t.Fatal(err)
	}
	want := new([]time.Duration)
	check := func(step string) {
		t.Helper()
		settle(t, f, r)
		if got := rec.latencies(); !slices.Equal(got, *want) {
			t.Fatalf("%s: realized %v, want %v", step, got, *want)
		}
	}
	return r, f.target(""), want, check
}

// TestRealizationLatency checks, on synctest's fake clock, that each
// change is reported once, when its Done status is committed, with the
// exact time since its Pending status was written: the operation's
// latency, the RetryAfter delay of a failure or a deferral. Changes
// without a start (a zero UpdatedAt), refreshes and deletes are not
// reported.
func TestRealizationLatency(t *testing.T) {
	rec := &realizedRecorder{}
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.Metrics = rec
			cfg.RefreshInterval = time.Minute
			cfg.RefreshRateLimiter = rate.NewLimiter(rate.Inf, 1)
		},
		func(f *fixture, _ *timedOps) {
			r, target, want, check := realizedCheck(t, f, rec)

			// Written now, Done once the 3s operation is committed.
			target.SetLatency(func() time.Duration { return 3 * time.Second })
			insert(t, f, &testObject{ID: "1", Value: "one", Status: reconciler.StatusPending()})
			*want = append(*want, 3*time.Second)
			check("a slow operation")

			// No UpdatedAt: the start is unknown, nothing is reported.
			insert(t, f, &testObject{ID: "2", Value: "two", Status: reconciler.Status{Kind: reconciler.StatusKindPending}})
			check("a status without UpdatedAt")
			target.SetLatency(nil)

			// A change written 40s ago (say, while the agent was down)
			// is realized 40s after it was written.
			insert(t, f, &testObject{ID: "3", Value: "three", Status: reconciler.Status{
				Kind: reconciler.StatusKindPending, UpdatedAt: time.Now().Add(-40 * time.Second)}})
			*want = append(*want, 40*time.Second)
			check("a change written earlier")

			// A failure is not realized; its retry 5s later is, from the
			// change's own start, though the object said Error meanwhile.
			target.SetFault("4", fake.Fault{Mode: fake.ModeRetryAt, After: 5 * time.Second, Count: 1})
			insert(t, f, &testObject{ID: "4", Value: "four", Status: reconciler.StatusPending()})
			*want = append(*want, 5*time.Second)
			check("a failure and its retry")

			// Not ready for 2s (RetryAfter(2s, nil)): realized after 2s.
			target.SetFault("5", fake.Fault{Mode: fake.ModeDefer, After: 2 * time.Second, Count: 1})
			insert(t, f, &testObject{ID: "5", Value: "five", Status: reconciler.StatusPending()})
			*want = append(*want, 2*time.Second)
			check("a deferral")

			// Refreshes and deletes are no user's change to realize.
			mark := target.Mark()
			time.Sleep(time.Minute) // Done for longer than RefreshInterval: refreshed on its own schedule
			if _, err := target.Expect(context.Background(), mark, []string{
				"update-refresh(1)", "update-refresh(2)", "update-refresh(3)", "update-refresh(4)", "update-refresh(5)"},
				fake.Match{AnyOrder: true}); err != nil {
				t.Fatal(err)
			}
			check("a refresh")
			wtxn := f.db.WriteTxn(f.table)
			f.table.Delete(wtxn, &testObject{ID: "1"})
			wtxn.Commit()
			check("a delete")

			// Status() summarizes the same latencies: 2s 3s 5s 40s.
			got := r.Status().Realization
			wantInfo := reconciler.RealizationInfo{Samples: 4, P50: 3 * time.Second, P99: 40 * time.Second}
			if got != wantInfo {
				t.Errorf("Status().Realization = %+v, want %+v", got, wantInfo)
			}
		})
}

// TestRealizationLatencyStatusSet checks that a StatusSet's change is
// timed from StatusSet.Pending, which stamps every name's status.
func TestRealizationLatencyStatusSet(t *testing.T) {
	rec := &realizedRecorder{}
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.Name = "a"
			cfg.Metrics = rec
			cfg.GetObjectStatus = func(o *testObject) reconciler.Status { return o.Statuses.Get("a") }
			cfg.SetObjectStatus = func(o *testObject, st reconciler.Status) *testObject {
				o.Statuses = o.Statuses.Set("a", st)
				return o
			}
		},
		func(f *fixture, _ *timedOps) {
			r, err := f.reconciler("a")
			if err != nil {
				t.Fatal(err)
			}
			f.target("").SetLatency(func() time.Duration { return 250 * time.Millisecond })
			obj := &testObject{ID: "1", Value: "one", Statuses: reconciler.NewStatusSet()}
			insert(t, f, obj)
			settle(t, f, r)
			// The data changes: Pending again, for every name.
			time.Sleep(time.Minute)
			insert(t, f, &testObject{ID: "1", Value: "uno", Statuses: obj.Statuses.Pending()})
			settle(t, f, r)
			want := []time.Duration{250 * time.Millisecond, 250 * time.Millisecond}
			if got := rec.latencies(); !slices.Equal(got, want) {
				t.Fatalf("realized %v, want %v", got, want)
			}
		})
}

// TestRealizationLatencyWholeSet checks the same in the whole-set mode: a
// change is realized when the Sync that covered it has its Done status
// committed, and a change whose Sync failed when a later Sync succeeds,
// from the same start.
func TestRealizationLatencyWholeSet(t *testing.T) {
	rec := &realizedRecorder{}
	inSyncBubble(t,
		func(cfg *reconciler.Config[*testObject]) { cfg.Metrics = rec },
		func(f *fixture, _ *timedSync) {
			r, target, want, check := realizedCheck(t, f, rec)

			// The first Sync starts at initialization and takes 3s.
			target.SetLatency(func() time.Duration { return 3 * time.Second })
			insert(t, f, pendingObject("1", "one"))
			f.markInit()
			*want = append(*want, 3*time.Second)
			check("a slow Sync")
			target.SetLatency(nil)

			// No UpdatedAt: not reported.
			insert(t, f, &testObject{ID: "2", Value: "two", Status: reconciler.Status{Kind: reconciler.StatusKindPending}})
			check("a status without UpdatedAt")

			// The Sync after the 100ms quiet period fails, its retry 5s
			// later succeeds: realized 5.1s after the change, though the
			// object said Error meanwhile.
			target.SetFault("sync", fake.Fault{Mode: fake.ModeRetryAt, After: 5 * time.Second, Count: 1})
			insert(t, f, pendingObject("3", "three"))
			*want = append(*want, 5*time.Second+100*time.Millisecond)
			check("a failed Sync and its retry")

			// A delete leaves no status to time.
			wtxn := f.db.WriteTxn(f.table)
			f.table.Delete(wtxn, &testObject{ID: "1"})
			wtxn.Commit()
			check("a delete")

			got := r.Status().Realization
			wantInfo := reconciler.RealizationInfo{Samples: 2, P50: 3 * time.Second, P99: 5*time.Second + 100*time.Millisecond}
			if got != wantInfo {
				t.Errorf("Status().Realization = %+v, want %+v", got, wantInfo)
			}
		})
}

package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// waitExplain explains key until it is in state want and ok (if set)
// accepts the answer, waiting on Explanation.Changed between answers.
func waitExplain(ctx context.Context, t *testing.T, r reconciler.Reconciler[*testObject], key string,
	want reconciler.KeyState, ok func(reconciler.Explanation) bool) reconciler.Explanation {
	t.Helper()
	for {
		e, err := r.Explain(ctx, []byte(key))
		if err != nil {
			t.Fatalf("Explain(%q): %v", key, err)
		}
		if e.State == want && (ok == nil || ok(e)) {
			return e
		}
		select {
		case <-ctx.Done():
			t.Fatalf("Explain(%q) never said %s as wanted; last:\n%s", key, want, e)
		case <-e.Changed:
		}
	}
}

// explainFixture starts a fixture with one reconciler over a fake target,
// the table initialized.
func explainFixture(t *testing.T, cfg reconciler.Config[*testObject]) (*fixture, context.Context, reconciler.Reconciler[*testObject], *fake.Target) {
	t.Helper()
	f, ctx := startFixture(t, 20*time.Second)
	target := f.target("")
	ops := &testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }}
	if cfg.RetryBackoffMin == 0 {
		cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Hour, time.Hour // a failure stays Retrying
	}
	if cfg.FullReconciliationInterval == 0 {
		cfg.FullReconciliationInterval = reconciler.Off
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = reconciler.Off
	}
	r := mustNew(t, f, testConfig(f, ops, cfg))
	return f, ctx, r, target
}

func hasReason(sub string) func(reconciler.Explanation) bool {
	return func(e reconciler.Explanation) bool { return strings.Contains(e.Reason, sub) }
}

// TestExplainDoneAndAbsent: a key reconciled is Done with its next
// refresh; deleted and its Delete done, Absent once read.
func TestExplainDoneAndAbsent(t *testing.T) {
	f, ctx, r, _ := explainFixture(t, reconciler.Config[*testObject]{RefreshInterval: time.Hour})
	f.markInit()
	rev := f.insert(t, pendingObject("a", "one"))
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	e := waitExplain(ctx, t, r, "a", reconciler.KeyDone, nil)
	if !e.InTable || e.Status.Kind != reconciler.StatusKindDone || e.ReadTo < rev {
		t.Fatalf("Done key: %+v", e)
	}
	if want := e.Status.UpdatedAt.Add(time.Hour); !e.NextAttempt.Equal(want) {
		t.Fatalf("next attempt %s, want the refresh at %s", e.NextAttempt, want)
	}
	if !strings.Contains(e.String(), `"a": Done`) || !strings.Contains(e.String(), "next refresh: in 1h") {
		t.Fatalf("String():\n%s", e)
	}

	wtxn := f.db.WriteTxn(f.table)
	f.table.Delete(wtxn, &testObject{ID: "a"})
	rev = f.table.Revision(wtxn.Commit())
	e = waitExplain(ctx, t, r, "a", reconciler.KeyAbsent, func(e reconciler.Explanation) bool { return e.ReadTo >= rev })
	if e.InTable || e.Revision != 0 || e.LastError != "" {
		t.Fatalf("Absent key: %+v", e)
	}
}

// TestExplainRetrying: the next retry and why: the backoff, the delay
// RetryAfter asked for, not ready yet (RetryAfter without an error).
func TestExplainRetrying(t *testing.T) {
	f, ctx, r, target := explainFixture(t, reconciler.Config[*testObject]{})
	f.markInit()
	target.SetFault("b", fake.Fault{Mode: fake.ModeError})
	target.SetFault("ra", fake.Fault{Mode: fake.ModeRetryAt, After: 2 * time.Hour})
	target.SetFault("d", fake.Fault{Mode: fake.ModeDefer, After: 3 * time.Hour})
	rev := f.insert(t, pendingObject("b", "x"), pendingObject("ra", "x"), pendingObject("d", "x"))

	e := waitExplain(ctx, t, r, "b", reconciler.KeyRetrying, nil)
	if e.Reason != "backoff after 1 failure(s)" || e.Attempts != 1 || e.LastError != "update(b): failure" ||
		e.Revision == 0 || e.Revision > rev || e.Since.IsZero() {
		t.Fatalf("backoff: %+v", e)
	}
	if d := e.NextAttempt.Sub(e.Since); d < 30*time.Minute || d > time.Hour {
		t.Fatalf("next attempt %s after the failure, want the jittered backoff of 1h", d)
	}
	e = waitExplain(ctx, t, r, "ra", reconciler.KeyRetrying, nil)
	if !strings.Contains(e.Reason, "RetryAfter") || e.NextAttempt.Sub(e.Since) != 2*time.Hour {
		t.Fatalf("RetryAfter: %+v", e)
	}
	e = waitExplain(ctx, t, r, "d", reconciler.KeyRetrying, nil)
	if !strings.Contains(e.Reason, "not ready yet") || e.LastError != "" || e.NextAttempt.Sub(e.Since) != 3*time.Hour {
		t.Fatalf("deferral: %+v", e)
	}
}

// TestExplainBreaker: while every attempt fails the same way, a retry
// held by the breaker says so.
func TestExplainBreaker(t *testing.T) {
	f, ctx, r, target := explainFixture(t, reconciler.Config[*testObject]{
		RetryBackoffMin: time.Millisecond, RetryBackoffMax: 10 * time.Second,
	})
	f.markInit()
	target.SetFault("*", fake.Fault{Mode: fake.ModeDown})
	var objs []*testObject
	for i := range 40 {
		objs = append(objs, pendingObject(string(rune('A'+i)), "x"))
	}
	f.insert(t, objs...)
	f.waitFor(ctx, t, "a retry held by the breaker", func() bool {
		for _, o := range objs {
			e, err := r.Explain(ctx, []byte(o.ID))
			if err != nil {
				t.Fatal(err)
			}
			if e.State == reconciler.KeyRetrying && strings.Contains(e.Reason, "breaker open") &&
				strings.Contains(e.Reason, "connection refused") {
				return true
			}
		}
		return false
	})
}

// TestExplainGivenUp: Permanent, MaxRetries and a misconfiguration, each
// with when refresh retries it.
func TestExplainGivenUp(t *testing.T) {
	t.Run("permanent", func(t *testing.T) {
		f, ctx, r, target := explainFixture(t, reconciler.Config[*testObject]{RefreshInterval: time.Hour})
		f.markInit()
		target.SetFault("p", fake.Fault{Mode: fake.ModePermanent})
		f.insert(t, pendingObject("p", "x"))
		e := waitExplain(ctx, t, r, "p", reconciler.KeyGivenUp, nil)
		if e.Reason != "given up on: a Permanent error; refresh retries it" || e.LastError == "" ||
			!e.NextAttempt.Equal(e.Status.UpdatedAt.Add(time.Hour)) {
			t.Fatalf("permanent: %+v", e)
		}
	})
	t.Run("max retries", func(t *testing.T) {
		f, ctx, r, target := explainFixture(t, reconciler.Config[*testObject]{
			MaxRetries: 2, RetryBackoffMin: time.Millisecond, RetryBackoffMax: time.Millisecond,
		})
		f.markInit()
		target.SetFault("m", fake.Fault{Mode: fake.ModeError})
		f.insert(t, pendingObject("m", "x"))
		e := waitExplain(ctx, t, r, "m", reconciler.KeyGivenUp, nil)
		if e.Reason != "given up on: MaxRetries spent; only a change retries it" || e.Attempts != 2 ||
			!strings.Contains(e.LastError, "retry budget spent") || !e.NextAttempt.IsZero() {
			t.Fatalf("max retries: %+v", e)
		}
	})
	t.Run("misconfiguration", func(t *testing.T) {
		f, ctx, r, _ := explainFixture(t, reconciler.Config[*testObject]{})
		_ = r
		cfg := testConfig(f, &testOps{target: f.target("bad"), getStatus: func(o *testObject) reconciler.Status { return o.Status }},
			reconciler.Config[*testObject]{Name: "bad", FullReconciliationInterval: reconciler.Off, RefreshInterval: reconciler.Off})
		cfg.GetObjectStatus = func(o *testObject) reconciler.Status { return o.Statuses.Get("bad") }
		cfg.SetObjectStatus = func(o *testObject, s reconciler.Status) *testObject { o.Statuses = o.Statuses.Set("bad", s); return o }
		cfg.CloneObject = func(o *testObject) *testObject { return o }
		bad := mustNew(t, f, cfg)
		f.markInit()
		f.insert(t, &testObject{ID: "c", Statuses: reconciler.NewStatusSet().Pending("bad")})
		e := waitExplain(ctx, t, bad, "c", reconciler.KeyGivenUp, nil)
		if !strings.Contains(e.Reason, "misconfiguration") || !strings.Contains(e.LastError, "CloneObject returned the object itself") {
			t.Fatalf("misconfiguration: %+v", e)
		}
	})
}

// TestExplainRunningThenBusy: an attempt in flight is Running; past its
// timeout it counts as failed, and its retry waits for it (Busy).
func TestExplainRunningThenBusy(t *testing.T) {
	f, ctx, r, target := explainFixture(t, reconciler.Config[*testObject]{
		OperationTimeout: 50 * time.Millisecond,
		RetryBackoffMin:  time.Millisecond, RetryBackoffMax: time.Millisecond,
	})
	f.markInit()
	target.SetFault("s", fake.Fault{Mode: fake.ModeStuck})
	t.Cleanup(func() { target.Heal("") })
	rev := f.insert(t, pendingObject("s", "1"))
	e := waitExplain(ctx, t, r, "s", reconciler.KeyRunning, nil)
	if e.Since.IsZero() || e.Revision != rev || !strings.Contains(e.Reason, "Update in flight; times out after 50ms") {
		t.Fatalf("running: %+v", e)
	}
	e = waitExplain(ctx, t, r, "s", reconciler.KeyBusy, hasReason("past its timeout"))
	if !strings.Contains(e.LastError, "operation timed out") {
		t.Fatalf("busy: %+v", e)
	}
	target.Heal("")
	waitExplain(ctx, t, r, "s", reconciler.KeyDone, nil)
}

// TestExplainWaitingForRoom: with the one worker held, the next key waits
// for it (Queued), and once the round is full the one after is not read
// (Unread).
func TestExplainWaitingForRoom(t *testing.T) {
	f, ctx, r, target := explainFixture(t, reconciler.Config[*testObject]{RoundSize: 2})
	f.markInit()
	target.SetFault("t", fake.Fault{Mode: fake.ModeStuck})
	t.Cleanup(func() { target.Heal("") })
	f.insert(t, pendingObject("t", "1"))
	waitExplain(ctx, t, r, "t", reconciler.KeyRunning, nil)
	f.insert(t, pendingObject("q", "1"))
	e := waitExplain(ctx, t, r, "q", reconciler.KeyQueued, nil)
	if e.Reason != "waiting for a worker: 1 operation(s) running, Concurrency 1" {
		t.Fatalf("queued: %+v", e)
	}
	rev := f.insert(t, pendingObject("u", "1"))
	e = waitExplain(ctx, t, r, "u", reconciler.KeyUnread, func(e reconciler.Explanation) bool { return e.Revision == rev })
	if e.Reason != "waiting for room in a round: 2 request(s) outstanding, RoundSize 2" || e.ReadTo >= rev {
		t.Fatalf("unread: %+v", e)
	}
	target.Heal("")
	waitExplain(ctx, t, r, "u", reconciler.KeyDone, nil)
}

// TestExplainReconcilerState: suspended, the table not initialized, Unset.
func TestExplainReconcilerState(t *testing.T) {
	f, ctx, r, _ := explainFixture(t, reconciler.Config[*testObject]{StartSuspended: true})
	rev := f.insert(t, pendingObject("a", "x"), &testObject{ID: "u", Status: reconciler.StatusUnset()})
	e := waitExplain(ctx, t, r, "a", reconciler.KeyUnread, nil)
	if !e.Suspended || e.Initialized || !strings.Contains(e.Reason, "suspended") ||
		!strings.Contains(e.String(), "reconciler: suspended") {
		t.Fatalf("suspended: %+v", e)
	}
	r.Resume()
	e = waitExplain(ctx, t, r, "a", reconciler.KeyDone, nil)
	if e.Initialized || !strings.Contains(e.String(), "table not initialized") {
		t.Fatalf("not initialized:\n%s", e)
	}
	e = waitExplain(ctx, t, r, "u", reconciler.KeyUnset, func(e reconciler.Explanation) bool { return e.ReadTo >= rev })
	if e.Status.Kind != reconciler.StatusKindUnset {
		t.Fatalf("unset: %+v", e)
	}
	f.markInit()
	waitExplain(ctx, t, r, "a", reconciler.KeyDone, func(e reconciler.Explanation) bool { return e.Initialized })
}

// TestExplainNotOwned: a key another replica owns says so.
func TestExplainNotOwned(t *testing.T) {
	f, ctx := startFixture(t, 20*time.Second)
	own := newFakeOwnership(func(key string) bool { return key != "theirs" })
	r := mustNew(t, f, ownConfig(f, newOwnOps(func(context.Context, string, int) error { return nil }), own, reconciler.Config[*testObject]{}))
	f.markInit()
	rev := f.insert(t, pendingObject("theirs", "x"), pendingObject("mine", "x"))
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	e := waitExplain(ctx, t, r, "theirs", reconciler.KeyNotOwned, nil)
	if e.Status.Kind != reconciler.StatusKindPending {
		t.Fatalf("not owned: %+v", e)
	}
	waitExplain(ctx, t, r, "mine", reconciler.KeyDone, nil)
}

// TestExplainNotRunning: before the hive starts, Explain waits for it and
// says ErrNotRunning when its context ends; after the hive stops it says
// ErrNotRunning at once.
func TestExplainNotRunning(t *testing.T) {
	f := newFixture(t)
	var r reconciler.Reconciler[*testObject]
	f.hive.Populate(f.log)
	r = mustNew(t, f, testConfig(f, &testOps{target: f.target(""), getStatus: func(o *testObject) reconciler.Status { return o.Status }},
		reconciler.Config[*testObject]{}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, err := r.Explain(ctx, []byte("a")); !errors.Is(err, reconciler.ErrNotRunning) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("before start: %v, want ErrNotRunning and the context's error", err)
	}
	if err := f.hive.Start(f.log, context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Explain(context.Background(), []byte("a")); err != nil {
		t.Fatalf("running: %v", err)
	}
	if err := f.hive.Stop(f.log, context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Explain(context.Background(), []byte("a")); !errors.Is(err, reconciler.ErrNotRunning) {
		t.Fatalf("after stop: %v, want ErrNotRunning", err)
	}
}

// TestExplainDeletedKey: a key whose Delete succeeded is Absent with
// Deleted set and Since the moment its Delete was committed; one never
// seen is Absent without it.
func TestExplainDeletedKey(t *testing.T) {
	inBubble(t, func(*reconciler.Config[*testObject]) {}, func(f *fixture, ops *timedOps) {
		insert(t, f, pendingObject("route", "v"))
		synctest.Wait()
		time.Sleep(time.Second)
		deletedAt := time.Now()
		wtxn := f.db.WriteTxn(f.table)
		f.table.Delete(wtxn, &testObject{ID: "route"})
		wtxn.Commit()
		synctest.Wait()
		r, _ := f.reconciler("")
		e, err := r.Explain(context.Background(), []byte("route"))
		if err != nil || e.State != reconciler.KeyAbsent || !e.Deleted || !e.Since.Equal(deletedAt) || !strings.Contains(e.Reason, "Delete succeeded") {
			t.Fatalf("Explain(route) after its Delete = %v: %+v, want Absent, Deleted, since %v", err, e, deletedAt)
		}
		e, err = r.Explain(context.Background(), []byte("never"))
		if err != nil || e.State != reconciler.KeyAbsent || e.Deleted || !e.Since.IsZero() {
			t.Fatalf("Explain(never) = %v: %+v, want Absent, not deleted", err, e)
		}
	})
}

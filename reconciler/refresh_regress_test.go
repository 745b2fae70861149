package reconciler_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// Refresh must come to every object that is due, whatever it was doing
// when a walk of the table passed it: what is due is read from the
// request table and the table's own times, never from a mark that only
// moves forward past objects it skipped.

// inRefreshBubble starts, inside a synctest bubble, a fixture whose table
// holds objs before the reconciler starts (an earlier run left them), and
// a reconciler refreshing every hour over ops (nil: the fake target) with
// the Ownership own returns (nil: none; made inside the bubble, whose
// channels the loop must wait on); fn runs once it has settled on the
// bubble's clock.
func inRefreshBubble(t *testing.T, objs []*testObject, ops reconciler.Operations[*testObject],
	own func() reconciler.Ownership, fn func(t *testing.T, f *fixture, target *fake.Target)) {
	synctest.Test(t, func(t *testing.T) {
		f := startedFixture(t)
		target := f.target("")
		f.load(objs)
		if ops == nil {
			ops = &testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }}
		}
		var ownership reconciler.Ownership
		if own != nil {
			ownership = own()
		}
		cfg := testConfig(f, ops,
			reconciler.Config[*testObject]{
				RoundRateLimiter:           rate.NewLimiter(rate.Inf, 1),
				FullReconciliationInterval: reconciler.Off,
				RefreshInterval:            time.Hour,
				RefreshRateLimiter:         rate.NewLimiter(rate.Inf, 1),
				RetryBackoffMin:            time.Second,
				RetryBackoffMax:            time.Second,
				Ownership:                  ownership,
			})
		r, err := reconciler.New(cfg, f.params)
		if err != nil {
			t.Fatal(err)
		}
		f.reconcilers[""] = r
		synctest.Wait()
		fn(t, f, target)
	})
}

// TestRefreshGivenUpAfterRestart: an object an earlier run left in Error
// is retried at once and fails for good with the very message it carries,
// so no status is written. Refresh must still try it again
// RefreshInterval later (it stayed Error for ever, with nothing
// scheduled, when the walk had passed it while its retry was out).
func TestRefreshGivenUpAfterRestart(t *testing.T) {
	msg := "the target refuses it"
	failed := reconciler.Status{Kind: reconciler.StatusKindError, UpdatedAt: time.Now().Add(-2 * time.Hour), Error: msg}
	objs := []*testObject{{ID: "x", Value: "v", Status: failed}}
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error {
		return reconciler.Permanent(errors.New(msg))
	})
	inRefreshBubble(t, objs, ops, nil, func(t *testing.T, f *fixture, _ *fake.Target) {
		if got := ops.count("x"); got != 1 {
			t.Fatalf("%d attempts, want the earlier run's Error retried at once, failing for good", got)
		}
		time.Sleep(3 * time.Hour)
		synctest.Wait()
		if !slices.Contains(ops.statuses(), reconciler.StatusKindRefreshing) {
			t.Fatalf("Update saw %v three hours later: the given-up object was never refreshed", ops.statuses())
		}
	})
}

// TestRefreshGivenUpWhileRetrying: the same with the walk passing an
// object while its retry is out, the retry then failing for good with the
// message the object already says.
func TestRefreshGivenUpWhileRetrying(t *testing.T) {
	msg := "the target refuses it"
	ops := newScriptedOps(func(_ context.Context, _ string, n int, _ *testObject) error {
		if n == 0 {
			return reconciler.RetryAfter(2*time.Hour, errors.New(msg)) // Error, retried in two hours
		}
		return reconciler.Permanent(errors.New(msg)) // the same message: no status write
	})
	inRefreshBubble(t, nil, ops, nil, func(t *testing.T, f *fixture, _ *fake.Target) {
		insert(t, f, pendingObject("x", "v"))
		synctest.Wait()
		// The walk passes x an hour after its Error was written, while
		// its retry is out; the retry fails for good an hour later.
		time.Sleep(150 * time.Minute)
		synctest.Wait()
		if got := ops.count("x"); got != 2 {
			t.Fatalf("%d attempts, want the first and its retry", got)
		}
		time.Sleep(3 * time.Hour)
		synctest.Wait()
		if !slices.Contains(ops.statuses(), reconciler.StatusKindRefreshing) {
			t.Fatalf("Update saw %v: the object given up on was never refreshed", ops.statuses())
		}
	})
}

// TestRefreshNotOwnedForAMoment: a refresh skipped because Owns said no
// at that moment, with ownership back before any Changed (or none at
// all: a lease briefly in doubt), must still come.
func TestRefreshNotOwnedForAMoment(t *testing.T) {
	var own *fakeOwnership
	newOwn := func() reconciler.Ownership { own = newFakeOwnership(ownsAll); return own }
	inRefreshBubble(t, nil, nil, newOwn, func(t *testing.T, f *fixture, target *fake.Target) {
		insert(t, f, pendingObject("x", "v"))
		synctest.Wait()
		time.Sleep(59 * time.Minute)
		own.ownQuietly(ownsNone) // in doubt over the refresh
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		own.ownQuietly(ownsAll) // back, and no Changed ever says so
		time.Sleep(3 * time.Hour)
		synctest.Wait()
		if got := target.History(); !slices.Contains(got, "update-refresh(x)") {
			t.Fatalf("history %v: the refresh skipped while not owned never came", got)
		}
	})
}

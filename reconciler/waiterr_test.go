package reconciler_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// TestWaitsSayWhy: every wait that gives up names the key it waited for
// and why it is not done, as Explain says; a misconfiguration comes back
// at once, whatever the wait. Each case is a key whose Update always
// fails, panics, hangs or fails for good, or a CloneObject that returns
// its argument; each wait is asked with a minute of bubble time. want
// lists what the error must say ("" : the wait returns nil); at once, that
// it returns before its deadline.
func TestWaitsSayWhy(t *testing.T) {
	type want struct{ forReconciliation, settled, reconciled []string }
	for _, tc := range []struct {
		name   string
		fault  fake.Mode
		clone  bool
		atOnce bool
		want   want
	}{
		{name: "fails", fault: fake.ModeError, want: want{
			forReconciliation: []string{"k is Error", "says Retrying: backoff after", "last error: update(k): failure"},
			settled:           []string{"k (waiting for a retry", "last: update(k): failure", "k is Retrying"}}},
		{name: "panics", fault: fake.ModePanic, want: want{
			forReconciliation: []string{"k is Error", "panic", "says Retrying"},
			settled:           []string{"k (waiting for a retry", "panic", "k is Retrying"}}},
		{name: "hangs", fault: fake.ModeHang, want: want{
			forReconciliation: []string{"k is Pending", "says Running: Update in flight"},
			settled:           []string{"k (in flight)", "k is Running: Update in flight"},
			reconciled:        []string{"k (in flight)", "k is Running: Update in flight"}}},
		{name: "given up", fault: fake.ModePermanent, want: want{
			forReconciliation: []string{"k is Error", "says GivenUp: given up on: a Permanent error"}}},
		{name: "clone returns its argument", clone: true, atOnce: true, want: want{
			forReconciliation: []string{"CloneObject returned the object itself"},
			settled:           []string{"CloneObject returned the object itself"},
			reconciled:        []string{"CloneObject returned the object itself"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inBubble(t,
				func(cfg *reconciler.Config[*testObject]) {
					cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Second, time.Second
					if tc.clone {
						cfg.CloneObject = func(o *testObject) *testObject { return o }
					}
				},
				func(f *fixture, ops *timedOps) {
					if tc.fault != "" {
						f.target("").SetFault("k", fake.Fault{Mode: tc.fault})
					}
					insert(t, f, pendingObject("k", "v"))
					rev := f.table.Revision(f.db.ReadTxn())
					r, _ := f.reconciler("")
					waits := map[string]func(context.Context) error{
						"WaitForReconciliation": func(ctx context.Context) error {
							return reconciler.WaitForReconciliation(ctx, f.db, f.table, statusIndex)
						},
						"WaitUntilSettled": func(ctx context.Context) error { return r.WaitUntilSettled(ctx, rev) },
						"WaitUntilReconciled": func(ctx context.Context) error {
							_, _, err := r.WaitUntilReconciled(ctx, rev)
							return err
						},
					}
					for name, wantIn := range map[string][]string{"WaitForReconciliation": tc.want.forReconciliation,
						"WaitUntilSettled": tc.want.settled, "WaitUntilReconciled": tc.want.reconciled} {
						ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
						err := waits[name](ctx)
						cancel()
						checkWaitError(t, name, err, wantIn, tc.atOnce)
						f.target("").Heal("k") // a hung Update returns; set the fault again
						if tc.fault != "" {
							f.target("").SetFault("k", fake.Fault{Mode: tc.fault})
						}
					}
				})
		})
	}
}

func checkWaitError(t *testing.T, name string, err error, want []string, atOnce bool) {
	t.Helper()
	switch {
	case len(want) == 0 && err != nil:
		t.Errorf("%s: %v, want nil", name, err)
	case len(want) == 0:
	case err == nil:
		t.Errorf("%s returned nil, want an error saying %q", name, want)
	case atOnce && (errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, reconciler.ErrInvalidConfig)):
		t.Errorf("%s: %v, want the misconfiguration at once", name, err)
	case !atOnce && !errors.Is(err, context.DeadlineExceeded):
		t.Errorf("%s: %v, want it to wrap the context's error", name, err)
	default:
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", name, err, w)
			}
		}
	}
}

// TestWaitForReconciliationNeedsIndex: a table made without the status
// index the wait is given fails the wait at once, saying what to add,
// instead of panicking inside statedb.
func TestWaitForReconciliationNeedsIndex(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		if err := f.hive.Start(f.log, context.Background()); err != nil {
			t.Fatal(err)
		}
		defer f.hive.Stop(f.log, context.Background())
		err := reconciler.WaitForReconciliation(context.Background(), f.db, f.table, otherStatusIndex)
		if !errors.Is(err, reconciler.ErrInvalidConfig) || !strings.Contains(err.Error(), `has no index "status2"`) ||
			!strings.Contains(err.Error(), "statedb.NewTable") {
			t.Fatalf("WaitForReconciliation with an index the table lacks: %v", err)
		}
	})
}

// otherStatusIndex is a status index the fixture's table is not made with.
var otherStatusIndex = index.NewStatusIndex("status2", func(o *testObject) reconciler.Status { return o.Status })

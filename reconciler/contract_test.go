package reconciler_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// countingMetrics counts UnreconciledWrite calls.
type countingMetrics struct {
	reconciler.NopMetrics
	unreconciled atomic.Int64
}

func (m *countingMetrics) Reconciler(reconciler.ReconcilerID) reconciler.ReconcilerMetrics { return m }
func (m *countingMetrics) UnreconciledWrite()                                              { m.unreconciled.Add(1) }

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestUnreconciledWriteNoticed: an object copied from the table, changed
// and inserted again without StatusPending() is not reconciled (as with
// statedb's reconciler), but converge says so: a metric, a log line with
// the key and the rule, and Explain. A restored object carrying an old
// Done is no such write.
func TestUnreconciledWriteNoticed(t *testing.T) {
	f, ctx := startFixture(t, 20*time.Second)
	f.markInit()
	var logs syncBuffer
	p := f.params
	p.Log = slog.New(slog.NewTextHandler(&logs, nil))
	m := &countingMetrics{}
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return nil })
	r, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{Metrics: m}), p)
	if err != nil {
		t.Fatal(err)
	}
	rev := f.insert(t, pendingObject("x", "one"))
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		t.Fatal(err)
	}
	// A restored object with a Done of an earlier run: no such write.
	old := reconciler.Status{Kind: reconciler.StatusKindDone, UpdatedAt: time.Now().Add(-time.Hour)}
	rev = f.insert(t, &testObject{ID: "restored", Value: "v", Status: old})
	waitExplain(ctx, t, r, "restored", reconciler.KeyDone, func(e reconciler.Explanation) bool { return e.ReadTo >= rev })

	changed := f.get("x").Clone()
	changed.Value = "two" // the status copied along: still Done
	rev = f.insert(t, changed)
	e := waitExplain(ctx, t, r, "x", reconciler.KeyDone, func(e reconciler.Explanation) bool { return e.ReadTo >= rev })
	if !strings.Contains(e.Reason, "not reconciled") || !strings.Contains(e.Reason, "StatusPending()") {
		t.Fatalf("Explain's reason %q does not say the change was not reconciled", e.Reason)
	}
	if n := m.unreconciled.Load(); n != 1 {
		t.Errorf("%d unreconciled writes counted, want 1", n)
	}
	if out := logs.String(); !strings.Contains(out, "without StatusPending()") || !strings.Contains(out, "key=x") {
		t.Errorf("no log line names the key and the rule:\n%s", out)
	}
	if got := ops.count("x"); got != 1 {
		t.Errorf("%d updates of x: the unreconciled change was reconciled after all?", got)
	}
}

// TestUnreconciledWriteNotWithStatusSet: with two reconcilers on one
// table, each writing its own entry of a StatusSet, the other's writes
// keep this one's Done and are no writer's mistake: nothing is counted,
// also when the second is made after the first's run began (it was, in
// one run in a few hundred under load, before the check looked again).
func TestUnreconciledWriteNotWithStatusSet(t *testing.T) {
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprint("second after the first began=", late), func(t *testing.T) {
			f, ctx := startFixture(t, 20*time.Second)
			f.markInit()
			m := &countingMetrics{}
			ok := func(context.Context, string, int, *testObject) error { return nil }
			// b writes its Done once a has written all of its own: b's
			// writes carry a's Done, which a then reads.
			aDone := make(chan struct{})
			afterA := func(ctx context.Context, _ string, _ int, _ *testObject) error {
				select {
				case <-aDone:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			a := mustNew(t, f, statusSetConfig(f, "a", newScriptedOps(ok), reconciler.Config[*testObject]{Metrics: m}))
			if late { // a's loop runs, and has reconciled an object of its own
				rev := f.insert(t, &testObject{ID: "0", Statuses: reconciler.NewStatusSet().Pending("a")})
				if err := a.WaitUntilSettled(ctx, rev); err != nil {
					t.Fatal(err)
				}
			}
			b := mustNew(t, f, statusSetConfig(f, "b", newScriptedOps(afterA), reconciler.Config[*testObject]{Metrics: m}))
			var objs []*testObject
			for _, id := range []string{"1", "2", "3", "4"} {
				objs = append(objs, &testObject{ID: id, Statuses: reconciler.NewStatusSet().Pending("a", "b")})
			}
			rev := f.insert(t, objs...)
			if err := a.WaitUntilSettled(ctx, rev); err != nil {
				t.Fatal(err)
			}
			close(aDone)
			if err := b.WaitUntilSettled(ctx, rev); err != nil {
				t.Fatal(err)
			}
			if err := a.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
				t.Fatal(err) // a has read b's writes
			}
			if n := m.unreconciled.Load(); n != 0 {
				t.Errorf("%d unreconciled writes counted for the other reconciler's status writes", n)
			}
		})
	}
}

// TestUnnamedReconcilerLogsModule: a reconciler without Config.Name logs
// under its module's name, as the status table shows it, not as "".
func TestUnnamedReconcilerLogsModule(t *testing.T) {
	f, ctx := startFixture(t, 20*time.Second)
	f.markInit()
	var logs syncBuffer
	p := f.params
	p.Log = slog.New(slog.NewTextHandler(&logs, nil))
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return errors.New("refused") })
	r, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{RetryBackoffMin: time.Hour, RetryBackoffMax: time.Hour}), p)
	if err != nil {
		t.Fatal(err)
	}
	f.insert(t, pendingObject("x", "v"))
	waitExplain(ctx, t, r, "x", reconciler.KeyRetrying, nil)
	out := logs.String()
	if !strings.Contains(out, "Operation failed") || !strings.Contains(out, "reconciler=test ") {
		t.Errorf("the failure is not logged under the module's name:\n%s", out)
	}
}

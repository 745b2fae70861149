package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"

	"github.com/converge-go/converge/reconciler"
)

// The configuration findings (12, 13) of the engine-correctness review;
// the others are in regress_test.go and regress_sync_test.go.

// Finding 12: sizes that cannot work are refused at New, naming the field.
func TestRegressSizeBounds(t *testing.T) {
	f, _ := startFixture(t, 10*time.Second)
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return nil })
	for field, cfg := range map[string]reconciler.Config[*testObject]{
		"Config.RoundSize":   {RoundSize: int(^uint(0) >> 1)},
		"Config.Concurrency": {Concurrency: 1_000_000},
	} {
		_, err := reconciler.New(testConfig(f, ops, cfg), f.params)
		if !errors.Is(err, reconciler.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), field) {
			t.Errorf("New with a huge %s: %v, want an error naming it", field, err)
		}
	}
}

// Finding 13: two named reconcilers whose accessors read and write the
// same status are refused at New, naming both; with a StatusSet entry
// each they are accepted.
func TestRegressSharedStatusRefused(t *testing.T) {
	f, _ := startFixture(t, 10*time.Second)
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return nil })
	a := testConfig(f, ops, reconciler.Config[*testObject]{Name: "a"})
	mustNew(t, f, a)
	b := testConfig(f, ops, reconciler.Config[*testObject]{Name: "b"}) // the same Status field
	_, err := reconciler.New(b, f.params)
	if !errors.Is(err, reconciler.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), "test/a") || !strings.Contains(fmt.Sprint(err), "test/b") {
		t.Fatalf("New of a second reconciler on the same status: %v, want an error naming both", err)
	}
	mustNew(t, f, statusSetConfig(f, "c", ops, reconciler.Config[*testObject]{}))
	mustNew(t, f, statusSetConfig(f, "d", ops, reconciler.Config[*testObject]{}))
}

// Finding 13, where New cannot tell: accessors that panic on a zero
// object cannot be probed at New, so two reconcilers sharing the status
// are accepted; the first object either reads with a status of their
// writing reveals it, and health says so, naming both.
func TestRegressSharedStatusReportedInHealth(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return nil })
	unprobeable := func(name string) reconciler.Config[*testObject] {
		cfg := testConfig(f, ops, reconciler.Config[*testObject]{Name: name})
		get, set := cfg.GetObjectStatus, cfg.SetObjectStatus
		cfg.GetObjectStatus = func(o *testObject) reconciler.Status {
			if o.ID == "" {
				panic("no ID")
			}
			return get(o)
		}
		cfg.SetObjectStatus = func(o *testObject, s reconciler.Status) *testObject {
			if o.ID == "" {
				panic("no ID")
			}
			return set(o, s)
		}
		return cfg
	}
	mustNew(t, f, unprobeable("a"))
	mustNew(t, f, unprobeable("b")) // accepted: the probe cannot run
	f.markInit()
	f.insert(t, &testObject{ID: "x", Value: "1", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "health naming both", func() bool {
		for _, job := range []string{"reconcile-a", "reconcile-b"} {
			h := f.jobHealth(job)
			if h == nil {
				continue
			}
			h.Lock() // SimpleHealth's fields are guarded by its root's lock
			level, err := h.Level, h.Error
			h.Unlock()
			if level == cell.StatusDegraded && (strings.Contains(fmt.Sprint(err), `"test/a" and "test/b"`) || strings.Contains(fmt.Sprint(err), `"test/b" and "test/a"`)) {
				return true
			}
		}
		return false
	})
}

package convergeotel_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/statedb/index"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	convergeotel "github.com/converge-go/converge/otel"
	"github.com/converge-go/converge/reconciler"
)

// blockSignal is an Observer that says when a key is first Blocked.
type blockSignal chan string

func (b blockSignal) Observe(e reconciler.Event) {
	if e.Kind == reconciler.EventBlocked {
		select {
		case b <- e.Key:
		default:
		}
	}
}

// startBlocked starts a reconciler traced by tr in which an item whose
// Value is "needs:X" depends on X, writes "child" needing "parent",
// waits until it is Blocked, then writes "parent" and waits until both
// are Done.
func startBlocked(t *testing.T, tr *convergeotel.Tracer) {
	sig := make(blockSignal, 1)
	f := startWith(t, false, func(cfg *reconciler.Config[*item]) {
		cfg.DependsOn = func(o *item) []index.Key {
			if dep, ok := strings.CutPrefix(o.Value, "needs:"); ok {
				return []index.Key{index.String(dep)}
			}
			return nil
		}
	}, tr, sig)
	insert := func(o *item) {
		wtxn := f.db.WriteTxn(f.table)
		if _, _, err := f.table.Insert(wtxn, o); err != nil {
			t.Fatal(err)
		}
		wtxn.Commit()
	}
	insert(&item{ID: "child", Value: "needs:parent", Status: reconciler.StatusPending()})
	select {
	case <-sig:
	case <-f.ctx.Done():
		t.Fatal("child never Blocked")
	}
	insert(&item{ID: "parent", Value: "v", Status: reconciler.StatusPending()})
	f.settle()
}

// TestBlockedTimeOnAttempt: the attempt of a key that was Blocked on a
// dependency begins no later than when it was blocked and carries the span events
// "blocked" (with what it waited for) and "released", and the time
// blocked; a key never blocked carries none. The Tracer forgets a block
// once the attempt starts, and at once when the head sampler declines
// the attempt.
func TestBlockedTimeOnAttempt(t *testing.T) {
	tp, exp := traced(t)
	tr := convergeotel.New(convergeotel.Options{TracerProvider: tp})
	startBlocked(t, tr)
	child := spans(exp, convergeotel.SpanAttempt, "child")
	if len(child) != 1 {
		t.Fatalf("%d attempt spans of child, want 1", len(child))
	}
	ev := map[string]sdktrace.Event{}
	for _, e := range child[0].Events {
		ev[e.Name] = e
	}
	blocked, released, started := ev["blocked"], ev["released"], ev["started"]
	if blocked.Name == "" || released.Name == "" || started.Name == "" {
		t.Fatalf("child's events: %+v", child[0].Events)
	}
	if blocked.Time.Before(child[0].StartTime) || released.Time.Before(blocked.Time) || started.Time.Before(released.Time) {
		t.Errorf("span from %v; blocked %v, released %v, started %v", child[0].StartTime, blocked.Time, released.Time, started.Time)
	}
	if on := blocked.Attributes; len(on) != 1 || on[0].Key != convergeotel.AttrBlockedOn || !strings.Contains(on[0].Value.AsString(), "parent") {
		t.Errorf("the blocked event says %v", on)
	}
	if d := attr(child[0], convergeotel.AttrBlocked).AsFloat64(); d != released.Time.Sub(blocked.Time).Seconds() {
		t.Errorf("blocked for %v s, the events say %v", d, released.Time.Sub(blocked.Time))
	}
	parent := spans(exp, convergeotel.SpanAttempt, "parent")
	if len(parent) != 1 || attr(parent[0], convergeotel.AttrBlocked).Type() != 0 || len(parent[0].Events) != 2 {
		t.Errorf("parent, never blocked: %+v", parent)
	}
	if n := tr.Blocked(); n != 0 {
		t.Errorf("the Tracer remembers %d blocks after the attempts started", n)
	}

	t.Run("declined", func(t *testing.T) {
		tp, exp := traced(t)
		tr := convergeotel.New(convergeotel.Options{TracerProvider: tp, Sample: func(reconciler.Attempt) bool { return false }})
		startBlocked(t, tr)
		if n := len(exp.GetSpans()); n != 0 {
			t.Errorf("%d spans of declined attempts", n)
		}
		if n := tr.Blocked(); n != 0 {
			t.Errorf("the Tracer remembers %d blocks of declined attempts", n)
		}
	})
}

// TestBlockedIsBounded: a Tracer remembers at most MaxBlocked blocks, and
// forgets a key's block when the head sampler declines its attempt.
func TestBlockedIsBounded(t *testing.T) {
	tr := convergeotel.New(convergeotel.Options{Sample: func(reconciler.Attempt) bool { return false }})
	for i := range convergeotel.MaxBlocked + 10 {
		tr.Observe(reconciler.Event{Kind: reconciler.EventBlocked, Key: strconv.Itoa(i)})
	}
	if n := tr.Blocked(); n != convergeotel.MaxBlocked {
		t.Errorf("%d blocks remembered, want MaxBlocked (%d)", n, convergeotel.MaxBlocked)
	}
	tr.Observe(reconciler.Event{Kind: reconciler.EventReleased, Key: "0"})
	if tr.WantsAttempt(reconciler.Attempt{Key: "0", Attempt: 1}) {
		t.Fatal("the head sampler declines, the Tracer wants")
	}
	if n := tr.Blocked(); n != convergeotel.MaxBlocked-1 {
		t.Errorf("%d blocks remembered after one key's attempt was declined, want %d", n, convergeotel.MaxBlocked-1)
	}
}

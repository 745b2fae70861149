package fake

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// ended returns a context that has already ended: Expect then reports at
// once whether the operations so far match, without waiting for more.
func ended() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func update(t *testing.T, tgt *Target, key string) {
	t.Helper()
	if err := tgt.Update(context.Background(), key, "v", false); err != nil {
		t.Fatal(err)
	}
}

// The flake of suspend.txtar: after update(1) update(2), a delete(1) made
// the tail "update(2) delete(1)" match "delete(1) update(2)" before the new
// update(2) ran. Expect looks only past the operations it already matched.
func TestExpectLooksPastTheMark(t *testing.T) {
	tgt := New(Wrappers{})
	update(t, tgt, "1")
	update(t, tgt, "2")
	next, err := tgt.Expect(ended(), 0, []string{"update(1)", "update(2)"}, Match{})
	if err != nil || next != 2 {
		t.Fatalf("Expect = %d, %v; want 2, nil", next, err)
	}

	if err := tgt.Delete(context.Background(), "1"); err != nil {
		t.Fatal(err)
	}
	want := []string{"delete(1)", "update(2)"}
	if _, err := tgt.Expect(ended(), next, want, Match{AnyOrder: true}); err == nil ||
		!strings.Contains(err.Error(), "got only delete(1)") {
		t.Fatalf("Expect with update(2) still to come = %v, want it to wait", err)
	}
	update(t, tgt, "2")
	if next, err = tgt.Expect(ended(), next, want, Match{AnyOrder: true}); err != nil || next != 4 {
		t.Fatalf("Expect = %d, %v; want 4, nil", next, err)
	}
}

func TestExpectFailsAtOnceOnOtherOperations(t *testing.T) {
	tgt := New(Wrappers{})
	update(t, tgt, "1")
	update(t, tgt, "2")
	// A live context: Expect must not wait, since history only grows.
	_, err := tgt.Expect(context.Background(), 0, []string{"update(2)", "update(1)"}, Match{})
	if err == nil || !strings.Contains(err.Error(), "got update(1) update(2)") {
		t.Fatalf("Expect in the wrong order = %v, want a mismatch", err)
	}
}

func TestExpectAnyOrderKeepsEachKeysOrder(t *testing.T) {
	tgt := New(Wrappers{})
	tgt.SetFault("1", Fault{Mode: ModeError, Count: 1})
	update(t, tgt, "2")
	_ = tgt.Update(context.Background(), "1", "v", false) // fails once
	update(t, tgt, "1")

	anyOrder := Match{AnyOrder: true}
	if _, err := tgt.Expect(ended(), 0, []string{"update(1) fail", "update(1)", "update(2)"}, anyOrder); err != nil {
		t.Fatalf("across keys: %v", err)
	}
	if _, err := tgt.Expect(ended(), 0, []string{"update(1)", "update(1) fail", "update(2)"}, anyOrder); err == nil {
		t.Fatal("one key's operations out of order matched")
	}
	if _, err := tgt.Expect(ended(), 0, []string{"update(1) fail", "update(1)", "update(3)"}, anyOrder); err == nil {
		t.Fatal("another key's operation matched")
	}
}

func TestExpectSkipsLeadingOperations(t *testing.T) {
	tgt := New(Wrappers{})
	tgt.SetFault("1", Fault{Mode: ModeError, Count: 2})
	for range 3 {
		_ = tgt.Update(context.Background(), "1", "v", false)
	}
	update(t, tgt, "2")
	m := Match{Skip: regexp.MustCompile(`update\(1\) fail`)}
	next, err := tgt.Expect(ended(), 0, []string{"update(1)", "update(2)"}, m)
	if err != nil || next != 4 {
		t.Fatalf("Expect = %d, %v; want 4, nil", next, err)
	}
	// Skip matches whole entries only: "update(1)" is not skipped by
	// "update\(1\)" matching a prefix of "update(1) fail".
	m = Match{Skip: regexp.MustCompile(`update\(1\)`)}
	if _, err := tgt.Expect(ended(), 0, []string{"update(1) fail"}, m); err != nil {
		t.Fatalf("Skip matched a prefix: %v", err)
	}
}

func TestOpKey(t *testing.T) {
	for entry, want := range map[string]string{
		"update(1) fail":    "1",
		"update-refresh(a)": "a",
		"delete(x.y)":       "x.y",
		"prune(n=2)":        "prune",
		"sync(n=3) fail":    "sync",
	} {
		if got := OpKey(entry); got != want {
			t.Errorf("OpKey(%q) = %q, want %q", entry, got, want)
		}
	}
}

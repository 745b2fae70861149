package reconciler

import (
	"testing"
	"time"
)

// A deadline already past fires at once, and arming a later deadline
// never postpones an earlier one.
func TestTimerArmAt(t *testing.T) {
	var tm timer
	defer tm.disarm()
	if tm.c() != nil {
		t.Fatal("an unarmed timer has a channel")
	}
	tm.armAt(time.Now().Add(-time.Second))
	select {
	case <-tm.c():
		tm.fired()
	case <-time.After(10 * time.Second):
		t.Fatal("a deadline in the past did not fire")
	}
	if tm.armed {
		t.Fatal("still armed after it fired")
	}

	soon := time.Now().Add(time.Millisecond)
	tm.armAt(soon)
	tm.armAt(soon.Add(time.Hour)) // later: ignored
	if !tm.at.Equal(soon) {
		t.Fatalf("armed for %v, want the earlier %v", tm.at, soon)
	}
	select {
	case <-tm.c():
	case <-time.After(10 * time.Second):
		t.Fatal("the earlier deadline did not fire")
	}
}

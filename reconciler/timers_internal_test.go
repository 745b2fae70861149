package reconciler

import (
	"testing"
	"testing/synctest"
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

// Inside a synctest bubble the loop's timers run on the bubble's clock:
// a short wait (a round limiter's, under Go's millisecond sleeps) ends
// exactly when the bubble's clock says, and the bubble's goroutines stay
// durably blocked meanwhile (a timer on a file descriptor would have hung
// the bubble, as the timerfd this package once had did).
func TestTimerInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var tm timer
		defer tm.disarm()
		start := time.Now()
		tm.armAt(start.Add(300 * time.Microsecond))
		<-tm.c()
		tm.fired()
		if got := time.Since(start); got != 300*time.Microsecond {
			t.Fatalf("fired after %v of bubble time, want exactly 300µs", got)
		}
	})
}

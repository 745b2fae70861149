package clock

import (
	"runtime"
	"testing"
	"testing/synctest"
	"time"
)

// A deadline already past fires at once, and arming a later deadline
// never postpones an earlier one.
func TestTimerArmAt(t *testing.T) {
	var tm Timer
	defer tm.Disarm()
	if tm.C() != nil {
		t.Fatal("an unarmed timer has a channel")
	}
	tm.ArmAt(time.Now().Add(-time.Second))
	select {
	case <-tm.C():
		tm.Fired()
	case <-time.After(10 * time.Second):
		t.Fatal("a deadline in the past did not fire")
	}
	if tm.armed {
		t.Fatal("still armed after it fired")
	}

	soon := time.Now().Add(time.Millisecond)
	tm.ArmAt(soon)
	tm.ArmAt(soon.Add(time.Hour)) // later: ignored
	if !tm.at.Equal(soon) {
		t.Fatalf("armed for %v, want the earlier %v", tm.at, soon)
	}
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second):
		t.Fatal("the earlier deadline did not fire")
	}
}

// A fine timer hands short waits to its fineClock (on Linux) and long ones
// to time.Timer, re-arming across the two; close releases the clock (the
// package's goleak check sees its goroutine end).
func TestFineTimer(t *testing.T) {
	tm := Timer{Fine: true}
	defer tm.Close()
	waitFire := func(what string) {
		t.Helper()
		select {
		case <-tm.C():
			tm.Fired()
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not fire", what)
		}
	}
	tm.ArmAt(time.Now().Add(200 * time.Microsecond))
	if runtime.GOOS == "linux" && !tm.onFine {
		t.Fatal("a short wait is not on the fine clock")
	}
	waitFire("a short wait")

	tm.ArmAt(time.Now().Add(time.Hour))
	if tm.onFine {
		t.Fatal("a long wait is on the fine clock")
	}
	tm.ArmAt(time.Now().Add(100 * time.Microsecond)) // earlier: replaces the hour
	waitFire("a short wait armed over a long one")
	tm.ArmAt(time.Now().Add(-time.Second))
	waitFire("a deadline in the past")

	tm.ArmAt(time.Now().Add(time.Millisecond))
	tm.Disarm()
	if tm.C() != nil {
		t.Fatal("a disarmed timer has a channel")
	}
	tm.Close()
	if tm.fc != nil {
		t.Fatal("close kept the fine clock")
	}
}

// Inside a synctest bubble a fine timer's short waits go to time.Timer,
// which the bubble fakes: no timerfd, no goroutine blocked on a file
// descriptor, and the wait ends exactly when the bubble's clock says.
func TestFineTimerInBubble(t *testing.T) {
	if !RealClock() {
		t.Fatal("realClock is false outside a bubble")
	}
	synctest.Test(t, func(t *testing.T) {
		if RealClock() {
			t.Fatal("realClock is true inside a bubble")
		}
		tm := Timer{Fine: true}
		defer tm.Close()
		start := time.Now()
		tm.ArmAt(start.Add(300 * time.Microsecond))
		if tm.onFine || tm.fc != nil {
			t.Fatal("a short wait went to a fine clock inside a bubble")
		}
		<-tm.C()
		tm.Fired()
		if got := time.Since(start); got != 300*time.Microsecond {
			t.Fatalf("fired after %v of bubble time, want exactly 300µs", got)
		}
	})
}

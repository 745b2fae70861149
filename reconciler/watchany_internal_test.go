package reconciler

import (
	"testing"
	"time"
)

// TestWatchAnyFiresOnceArmedAgain: watchAny fires when any channel it was
// armed with closes, and once fired waits on nothing until armed again,
// even with the very channels it was armed with before (a table with
// changes still unread hands out the same closed channel every time).
func TestWatchAnyFiresOnceArmedAgain(t *testing.T) {
	w := newWatchAny()
	defer w.stop()
	fired := func() bool {
		select {
		case <-w.fired:
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	}
	a, b := make(chan struct{}), make(chan struct{})
	w.arm([]<-chan struct{}{a, b})
	close(b)
	if !fired() {
		t.Fatal("a closed channel did not fire")
	}
	w.woke()
	closedB := []<-chan struct{}{a, b}
	w.arm(closedB) // the same channels, b still closed: it must fire again
	if !fired() {
		t.Fatal("armed again with a closed channel, it did not fire")
	}
	w.woke()
	// Armed twice before the loop takes the token: the second arm finds
	// the token (or comes before it), and a token comes either way.
	w.arm(closedB)
	w.arm(closedB)
	if !fired() {
		t.Fatal("armed again after a token the loop did not take, it did not fire")
	}
	w.woke()
	c := make(chan struct{})
	w.arm([]<-chan struct{}{a, c})
	if fired() {
		t.Fatal("fired with no channel closed")
	}
	close(a)
	if !fired() {
		t.Fatal("the first channel's close did not fire")
	}
}

// Package clock holds the reconciler loop's timers: one-shot timers it
// arms and selects on, whose short waits go, on Linux, to a timerfd (a
// fine clock) instead of Go's millisecond-granular sleeps.
package clock

import "time"

// Timer is a one-shot timer a loop arms and selects on. Unarmed, its
// channel is nil, so a select case on it never fires. The zero Timer is
// usable; Fine makes its short waits precise.
type Timer struct {
	t     *time.Timer
	armed bool
	at    time.Time
	// Fine is set for a timer whose short waits must not be rounded up
	// to Go's millisecond sleeps (fineclock_linux.go): waits under
	// fineBelow then go to a fine clock, opened at the first such wait.
	Fine   bool
	fc     *fineClock
	onFine bool // armed on fc
}

// fineBelow is the longest wait a fine timer hands to its fineClock: a
// longer one is late by the runtime's granularity, a millisecond, which
// is small against it.
const fineBelow = 2 * time.Millisecond

// RealClock reports whether Go's clock is the machine's: whether time.Now
// carries a monotonic reading. Inside a testing/synctest bubble it does
// not: time is the bubble's fake clock, which advances only when every
// goroutine of the bubble is durably blocked. A fineClock there would be
// wrong twice over: its kernel timer runs on real time, and its goroutine,
// blocked reading a file descriptor, is not durably blocked, so the
// bubble's clock would never advance (users' tests hung so). A timer that
// sees a fake clock uses time.Timer, which the bubble fakes.
func RealClock() bool {
	now := time.Now()
	return now != now.Round(0) // Round(0) strips the monotonic reading
}

// Arm makes the timer fire after d, unless it is already armed to fire
// earlier.
func (t *Timer) Arm(d time.Duration) { t.ArmAt(time.Now().Add(d)) }

// ArmAt makes the timer fire at at, unless it is already armed to fire
// earlier. A deadline computed from a step's start time is armed as such:
// a duration from that time, armed after the step's work, would fire late
// by the work's duration.
func (t *Timer) ArmAt(at time.Time) {
	if t.armed && !at.Before(t.at) {
		return
	}
	t.Disarm()
	t.armed, t.at = true, at
	d := time.Until(at)
	if t.Fine && d < fineBelow && !RealClock() {
		t.Fine = false // a fake clock: kernel timers would run on the wrong one
	}
	if t.Fine && d < fineBelow {
		if t.fc == nil {
			if t.fc = newFineClock(); t.fc == nil {
				t.Fine = false // no timerfd: time.Timer it is
			}
		}
		if t.fc != nil {
			t.onFine = true
			t.fc.set(d)
			return
		}
	}
	if t.t == nil {
		t.t = time.NewTimer(d)
	} else {
		t.t.Reset(d)
	}
}

// Disarm stops the timer.
func (t *Timer) Disarm() {
	if !t.armed {
		return
	}
	if t.onFine {
		t.fc.stop()
	} else {
		t.t.Stop()
	}
	t.armed, t.onFine = false, false
}

// C is the channel to select on: nil when unarmed.
func (t *Timer) C() <-chan time.Time {
	switch {
	case !t.armed:
		return nil
	case t.onFine:
		return t.fc.c
	}
	return t.t.C
}

// Fired marks the timer as no longer armed after its channel fired.
func (t *Timer) Fired() { t.armed, t.onFine = false, false }

// Close disarms the timer and releases its fineClock.
func (t *Timer) Close() {
	t.Disarm()
	if t.fc != nil {
		t.fc.close()
		t.fc = nil
	}
}

// Armed reports whether the timer is armed.
func (t *Timer) Armed() bool { return t.armed }

// At is when an armed timer fires.
func (t *Timer) At() time.Time { return t.at }

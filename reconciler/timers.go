package reconciler

import "time"

// timer is a one-shot timer the loop arms and selects on. Unarmed, its
// channel is nil, so a select case on it never fires.
type timer struct {
	t     *time.Timer
	armed bool
	at    time.Time
	// fine is set for a timer whose short waits must not be rounded up
	// to Go's millisecond sleeps (fineclock_linux.go): waits under
	// fineBelow then go to fc, opened at the first such wait.
	fine   bool
	fc     *fineClock
	onFine bool // armed on fc
}

// fineBelow is the longest wait a fine timer hands to its fineClock: a
// longer one is late by the runtime's granularity, a millisecond, which
// is small against it.
const fineBelow = 2 * time.Millisecond

// realClock reports whether Go's clock is the machine's: whether time.Now
// carries a monotonic reading. Inside a testing/synctest bubble it does
// not: time is the bubble's fake clock, which advances only when every
// goroutine of the bubble is durably blocked. A fineClock there would be
// wrong twice over: its kernel timer runs on real time, and its goroutine,
// blocked reading a file descriptor, is not durably blocked, so the
// bubble's clock would never advance (users' tests hung so). A timer that
// sees a fake clock uses time.Timer, which the bubble fakes.
func realClock() bool {
	now := time.Now()
	return now != now.Round(0) // Round(0) strips the monotonic reading
}

// arm makes the timer fire after d, unless it is already armed to fire
// earlier.
func (t *timer) arm(d time.Duration) { t.armAt(time.Now().Add(d)) }

// armAt makes the timer fire at at, unless it is already armed to fire
// earlier. A deadline computed from a step's start time is armed as such:
// a duration from that time, armed after the step's work, would fire late
// by the work's duration.
func (t *timer) armAt(at time.Time) {
	if t.armed && !at.Before(t.at) {
		return
	}
	t.disarm()
	t.armed, t.at = true, at
	d := time.Until(at)
	if t.fine && d < fineBelow && !realClock() {
		t.fine = false // a fake clock: kernel timers would run on the wrong one
	}
	if t.fine && d < fineBelow {
		if t.fc == nil {
			if t.fc = newFineClock(); t.fc == nil {
				t.fine = false // no timerfd: time.Timer it is
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

// disarm stops the timer.
func (t *timer) disarm() {
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

// c is the channel to select on: nil when unarmed.
func (t *timer) c() <-chan time.Time {
	switch {
	case !t.armed:
		return nil
	case t.onFine:
		return t.fc.c
	}
	return t.t.C
}

// fired marks the timer as no longer armed after its channel fired.
func (t *timer) fired() { t.armed, t.onFine = false, false }

// close disarms the timer and releases its fineClock.
func (t *timer) close() {
	t.disarm()
	if t.fc != nil {
		t.fc.close()
		t.fc = nil
	}
}

// loopTimers are the loop's wake-ups that are not channels of their own.
type loopTimers struct {
	round   timer // the round limiter allows the next round
	retry   timer // the earliest retry is due
	commit  timer // finished results have waited long enough
	full    timer // the next periodic full reconciliation
	refresh timer // the refresh limiter allows more marking
	health  timer // a postponed health report is due
}

// newLoopTimers returns the loop's timers. The round limiter's waits are
// a millisecond or less at the rates users pace rounds at, and every
// change that comes while rounds are paced waits one: the round timer is
// fine.
func newLoopTimers() *loopTimers { return &loopTimers{round: timer{fine: true}} }

func (ts *loopTimers) stop() {
	for _, t := range []*timer{&ts.round, &ts.retry, &ts.commit, &ts.full, &ts.refresh, &ts.health} {
		t.close()
	}
}

package reconciler

import "time"

// timer is a one-shot timer the loop arms and selects on. Unarmed, its
// channel is nil, so a select case on it never fires. It is a time.Timer,
// so that inside a testing/synctest bubble every wait of the loop is on
// the bubble's fake clock.
type timer struct {
	t     *time.Timer
	armed bool
	at    time.Time
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
	t.t.Stop()
	t.armed = false
}

// c is the channel to select on: nil when unarmed.
func (t *timer) c() <-chan time.Time {
	if !t.armed {
		return nil
	}
	return t.t.C
}

// fired marks the timer as no longer armed after its channel fired.
func (t *timer) fired() { t.armed = false }

// loopTimers are the loop's wake-ups that are not channels of their own.
type loopTimers struct {
	round   timer // the round limiter allows the next round
	retry   timer // the earliest retry is due
	commit  timer // finished results have waited long enough
	full    timer // the next periodic full reconciliation
	refresh timer // the refresh limiter allows more marking
	health  timer // a postponed health report is due
}

// newLoopTimers returns the loop's timers, none armed.
func newLoopTimers() *loopTimers { return &loopTimers{} }

// stop disarms every timer.
func (ts *loopTimers) stop() {
	for _, t := range []*timer{&ts.round, &ts.retry, &ts.commit, &ts.full, &ts.refresh, &ts.health} {
		t.disarm()
	}
}

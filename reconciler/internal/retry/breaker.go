package retry

import (
	"log/slog"
	"time"
)

// BreakerThreshold is how many failures in a row, all with the same error
// and no success between them, open the breaker.
const BreakerThreshold = 32

// maxCanaryInterval bounds the spacing of canaries while the breaker is
// open: a single attempt that often is cheap (four a second, where the
// held objects on their own schedules would make thousands), and a target
// that comes back is noticed within it. Without a breaker, many failing
// objects on jittered schedules notice a recovery within milliseconds and
// are all through within one backoff step; a quarter of a second keeps
// converge ahead of that.
const maxCanaryInterval = 250 * time.Millisecond

// Breaker notices that the target is down for everyone (every attempt fails
// the same way, "connection refused") and then stops hammering it: instead
// of every failing object retrying on its own schedule, one retry (the
// canary) goes at a time, spaced by the backoff; the first success closes
// the breaker and the held retries, all due by then, go at once. Objects
// failing each for a reason of its own (different messages) never open it.
// New changes are never held; any success closes it, and so does a
// failure with another error than the one that opened it.
type Breaker struct {
	// Log receives the breaker's opening and closing.
	Log *slog.Logger

	lastErr string // the error of the current streak
	streak  int    // failures in a row with lastErr

	open       bool
	level      int       // canary failures since it opened
	nextCanary time.Time // when the next held retry may go
	backoff    Backoff
}

// Observe records one object's result. giveUp failures (permanent,
// exhausted) are not retried and count like any failure; retry says the
// attempt was a retry (a canary, when open).
func (b *Breaker) Observe(ok, giveUp bool, errMsg string, retry bool, now time.Time, bo Backoff) {
	switch {
	case ok:
		if b.open {
			b.Log.Info("Target recovered: releasing held retries")
		}
		*b = Breaker{Log: b.Log}
	case b.open && errMsg != b.lastErr:
		// Failures stopped being the same: the target is not down for
		// everyone any more, so every object goes back to its own
		// schedule.
		b.Log.Info("Failures differ again: releasing held retries", "error", errMsg)
		*b = Breaker{Log: b.Log, lastErr: errMsg, streak: 1}
	case errMsg != b.lastErr:
		b.lastErr, b.streak = errMsg, 1
	default:
		b.streak++
	}
	if ok {
		return
	}
	switch {
	case !b.open && b.streak >= BreakerThreshold:
		b.open, b.level = true, 1
		b.nextCanary = now.Add(min(bo.Delay(b.level), maxCanaryInterval))
		b.Log.Warn("Every attempt fails the same way: holding retries, trying one at a time until one succeeds",
			"error", errMsg, "failures", b.streak)
	case b.open && retry && !giveUp:
		b.level++ // the canary failed: space the next one out more
	}
	b.backoff = bo
}

// AllowRetries returns how many due retries may be picked up now, of at
// most budget: all of them while closed, one canary when it is time.
func (b *Breaker) AllowRetries(now time.Time, budget int) int {
	if !b.open {
		return budget
	}
	if now.Before(b.nextCanary) {
		return 0
	}
	// Pace by time, not by the canary's result, which may never come
	// back as one (the object changed meanwhile, or was deleted). One
	// attempt per maxCanaryInterval costs nothing and notices a recovery
	// within it; the backoff spaces the first few out less.
	b.nextCanary = now.Add(min(b.backoff.Delay(b.level), maxCanaryInterval))
	return min(budget, 1)
}

// NextRetry is when retries may next be picked up, given the earliest due.
func (b *Breaker) NextRetry(due time.Time) time.Time {
	if b.open && b.nextCanary.After(due) {
		return b.nextCanary
	}
	return due
}

// Open reports whether the breaker holds retries now, and Err the error
// every attempt fails with while it does.
func (b *Breaker) Open() bool { return b.open }

// Err is the error of the current streak of failures.
func (b *Breaker) Err() string { return b.lastErr }

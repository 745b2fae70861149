package reconciler

import (
	"log/slog"
	"time"
)

// breakerThreshold is how many failures in a row, all with the same error
// and no success between them, open the breaker.
const breakerThreshold = 32

// maxCanaryInterval bounds the spacing of canaries while the breaker is
// open: a single attempt that often is cheap (four a second, where the
// held objects on their own schedules would make thousands), and a target
// that comes back is noticed within it. Without a breaker, many failing
// objects on jittered schedules notice a recovery within milliseconds and
// are all through within one backoff step; a quarter of a second keeps
// converge ahead of that.
const maxCanaryInterval = 250 * time.Millisecond

// breaker notices that the target is down for everyone (every attempt fails
// the same way, "connection refused") and then stops hammering it: instead
// of every failing object retrying on its own schedule, one retry (the
// canary) goes at a time, spaced by the backoff; the first success closes
// the breaker and the held retries, all due by then, go at once. Objects
// failing each for a reason of its own (different messages) never open it.
// New changes are never held; any success closes it, and so does a
// failure with another error than the one that opened it.
type breaker struct {
	log *slog.Logger

	lastErr string // the error of the current streak
	streak  int    // failures in a row with lastErr

	open       bool
	level      int       // canary failures since it opened
	nextCanary time.Time // when the next held retry may go
	backoff    backoff
}

// observe records one object's result. giveUp failures (permanent,
// exhausted) are not retried and count like any failure; retry says the
// attempt was a retry (a canary, when open).
func (b *breaker) observe(ok, giveUp bool, errMsg string, retry bool, now time.Time, bo backoff) {
	switch {
	case ok:
		if b.open {
			b.log.Info("Target recovered: releasing held retries")
		}
		*b = breaker{log: b.log}
	case b.open && errMsg != b.lastErr:
		// Failures stopped being the same: the target is not down for
		// everyone any more, so every object goes back to its own
		// schedule.
		b.log.Info("Failures differ again: releasing held retries", "error", errMsg)
		*b = breaker{log: b.log, lastErr: errMsg, streak: 1}
	case errMsg != b.lastErr:
		b.lastErr, b.streak = errMsg, 1
	default:
		b.streak++
	}
	if ok {
		return
	}
	switch {
	case !b.open && b.streak >= breakerThreshold:
		b.open, b.level = true, 1
		b.nextCanary = now.Add(min(bo.delay(b.level), maxCanaryInterval))
		b.log.Warn("Every attempt fails the same way: holding retries, trying one at a time until one succeeds",
			"error", errMsg, "failures", b.streak)
	case b.open && retry && !giveUp:
		b.level++ // the canary failed: space the next one out more
	}
	b.backoff = bo
}

// allowRetries returns how many due retries may be picked up now, of at
// most budget: all of them while closed, one canary when it is time.
func (b *breaker) allowRetries(now time.Time, budget int) int {
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
	b.nextCanary = now.Add(min(b.backoff.delay(b.level), maxCanaryInterval))
	return min(budget, 1)
}

// nextRetry is when retries may next be picked up, given the earliest due.
func (b *breaker) nextRetry(due time.Time) time.Time {
	if b.open && b.nextCanary.After(due) {
		return b.nextCanary
	}
	return due
}

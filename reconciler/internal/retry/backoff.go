// Package retry holds the reconciler's retry mechanisms: exponential
// backoff with equal jitter, and the breaker that holds retries while every
// attempt fails the same way.
package retry

import (
	"math/rand/v2"
	"time"
)

// Backoff computes retry delays: exponential from min to max with "equal
// jitter" (half the delay fixed, half uniformly random). Jitter spreads the
// retries of objects that failed together, in one target outage, so they do
// not come back in lockstep; keeping half fixed means a dead target is never
// retried sooner than half the nominal backoff.
type Backoff struct {
	min, max time.Duration
	// Rand returns a uniform value in [0, n); replaceable in tests.
	Rand func(n int64) int64
}

// NewBackoff returns the backoff from min to max.
func NewBackoff(min, max time.Duration) Backoff {
	return Backoff{min: min, max: max, Rand: rand.Int64N}
}

// Nominal is the un-jittered delay before the attempt that follows the
// given number of consecutive failures (failures >= 1). It saturates at max
// for any count, so no shift or multiplication can overflow.
func (b Backoff) Nominal(failures int) time.Duration {
	d := b.min
	for i := 1; i < failures && d < b.max; i++ {
		if d > b.max/2 {
			return b.max
		}
		d *= 2
	}
	return min(d, b.max)
}

// Delay is Nominal with equal jitter applied.
func (b Backoff) Delay(failures int) time.Duration {
	d := b.Nominal(failures)
	if d <= 1 {
		return d
	}
	half := d / 2
	return d - half + time.Duration(b.Rand(int64(half)+1))
}

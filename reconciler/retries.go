package reconciler

import (
	"math/rand/v2"
	"time"
)

// backoff computes retry delays: exponential from min to max with "equal
// jitter" (half the delay fixed, half uniformly random). Jitter spreads the
// retries of objects that failed together, in one target outage, so they do
// not come back in lockstep; keeping half fixed means a dead target is never
// retried sooner than half the nominal backoff.
type backoff struct {
	min, max time.Duration
	rand     func(n int64) int64 // uniform in [0, n); replaceable in tests
}

func newBackoff(min, max time.Duration) backoff {
	return backoff{min: min, max: max, rand: rand.Int64N}
}

// nominal is the un-jittered delay before the attempt that follows the
// given number of consecutive failures (failures >= 1). It saturates at max
// for any count, so no shift or multiplication can overflow.
func (b backoff) nominal(failures int) time.Duration {
	d := b.min
	for i := 1; i < failures && d < b.max; i++ {
		if d > b.max/2 {
			return b.max
		}
		d *= 2
	}
	return min(d, b.max)
}

// delay is nominal with equal jitter applied.
func (b backoff) delay(failures int) time.Duration {
	d := b.nominal(failures)
	if d <= 1 {
		return d
	}
	half := d / 2
	return d - half + time.Duration(b.rand(int64(half)+1))
}

package metrics

import (
	"sync/atomic"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// waitClock turns the OldestWaiting gauge into an age read at scrape time.
//
// A reconciler reports its gauges only after a round, and while an
// operation hangs there may be no round for a long time: a gauge set from
// Gauges.OldestWaiting would freeze at its last value in exactly the case
// the oldest-waiting alert exists for. Between two reports the oldest
// waiting object can only stay waiting (committing its result ends a round,
// and every round reports), so its age at any later time is OldestWaiting
// plus the time since the report.
type waitClock struct {
	// since is when the oldest waiting object was picked up, in Unix
	// nanoseconds; 0 when no object waits.
	since atomic.Int64
}

func (c *waitClock) set(g reconciler.Gauges, now time.Time) {
	if g.Waiting == 0 {
		c.since.Store(0)
		return
	}
	c.since.Store(now.Add(-g.OldestWaiting).UnixNano())
}

// age returns how long the oldest waiting object has waited at now.
func (c *waitClock) age(now time.Time) time.Duration {
	since := c.since.Load()
	if since == 0 {
		return 0
	}
	return max(0, now.Sub(time.Unix(0, since)))
}

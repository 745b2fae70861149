package reconciler

import (
	"fmt"
	"time"

	"github.com/converge-go/converge/reconciler/internal/health"
)

// What a failed attempt does, the same for both loops: the breaker, health's
// recent errors, the failure log and the metrics see it, and its request is
// given up on (Held) or retried.

// fail records a failed attempt: the request is given up on (Held, and
// refreshed RefreshInterval later) or retried after RetryAfter's delay or
// the backoff.
func (c *committer[Obj]) fail(v *verdict[Obj], now time.Time) {
	r := v.r
	msg := v.failed.Error()
	if r.deleted {
		msg = "delete: " + msg
	}
	if v.giveUp != whyCycle { // never attempted: the target is not at fault
		c.breaker.Observe(false, v.giveUp != whyNone, msg, r.attempts > 0, now, c.backoff)
	}
	c.status.Recent.Add(health.Failure{Key: r.key, Err: msg, At: now})
	c.failLog.Write(&r.loggedErr, &r.loggedAt, printableKey(r.key), string(v.op), msg, r.attempts+1, now)
	r.attempts++
	if v.giveUp == whyCycle {
		c.t.holdCycle(r, msg, now)
		return
	}
	if v.giveUp != whyNone {
		var refreshAt time.Time
		if c.cfg.RefreshInterval != Off && c.cfg.SyncOperations == nil && !r.deleted {
			refreshAt = now.Add(c.cfg.RefreshInterval)
		}
		c.t.hold(r, v.giveUp, msg, refreshAt, now)
		c.obs.failed(r, v.failed, time.Time{})
		if v.giveUp == whyMisconfigured {
			c.log.Error("Reconciler misconfigured; the object is not reconciled", "key", printableKey(r.key), "error", v.failed)
		}
		return
	}
	failures := r.attempts
	if v.failures > 0 {
		failures = v.failures
	}
	delay, why := c.backoff.Delay(failures), whyBackoff
	if d, ok := retryAfter(v.err); ok {
		delay, why = d, whyRetryAfter
	}
	c.t.retry(r, now.Add(delay), why, msg, now)
	c.obs.failed(r, v.failed, now.Add(delay))
	c.metrics.RetryScheduled()
}

var errKeyChanged = fmt.Errorf("%w: Config.SetObjectStatus changed the object's primary key", ErrInvalidConfig)

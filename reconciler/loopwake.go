package reconciler

import (
	"context"
	"time"
)

// The per-object loop's wake-ups: once a step did what it could, the loop
// sleeps until one of its channels or timers fires (sleep), and reads new
// changes only when it may (pullWake).

// sleep waits until something happens. It returns false when stopping.
func (l *loop[Obj]) sleep(ctx context.Context, ts *loopTimers) bool {
	if l.t.cyclicDue() {
		return ctx.Err() == nil // their Errors are written at the next step
	}
	changesCh := l.pullWake(ts)
	var initCh <-chan struct{}
	if !l.initialized {
		initCh = l.initWatch
	}
	select {
	case <-ctx.Done():
		return false
	case <-l.ownChanged:
		l.ownChanged = l.cfg.Ownership.Changed() // before looking: a change meanwhile closes this one
		l.t.reown(l.cfg.Table.All(l.db.ReadTxn()), time.Now())
	case <-changesCh:
	case <-l.t.deps.needsWake():
		l.t.deps.needsWoke()
	case <-initCh:
		l.initialized = true
	case <-l.triggerFull:
		l.full.wanted = true
	case <-l.exec.Notify():
	case job := <-l.commits.pipe.Back():
		l.commits.pipe.Receive(job)
	case <-l.wake:
		l.status.Dirty = true
	case req := <-l.ask:
		req.reply <- explainLoop(l, req.key, time.Now())
	case <-ts.round.C():
		ts.round.Fired()
	case <-ts.retry.C():
		ts.retry.Fired()
	case <-ts.commit.C():
		ts.commit.Fired()
	case <-ts.refresh.C():
		ts.refresh.Fired()
	case <-ts.health.C():
		ts.health.Fired()
		l.status.Dirty = true // a report is due: a postponed one, or a key blocked long
	case <-ts.full.C():
		ts.full.Fired()
		l.full.wanted = true
	}
	return true
}

// pullWake returns the channel that wakes the loop for new changes, and
// arms the retry timer, when the loop may read: nil when it may not.
func (l *loop[Obj]) pullWake(ts *loopTimers) <-chan struct{} {
	if !l.canPull() || ts.round.Armed() || l.intakeWaits() {
		return nil
	}
	if next, ok := l.t.nextDue(); ok {
		ts.retry.ArmAt(l.commits.breaker.NextRetry(next))
	}
	return l.changesWatch
}

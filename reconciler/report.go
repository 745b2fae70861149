package reconciler

import (
	"fmt"
	"time"
)

// report publishes, after a step, what the outstanding work says: health,
// the gauges, the status snapshot and the progress the waits watch. It
// walks the active requests once: work proportional to a round, not to
// the table.
func (l *loop[Obj]) report(now time.Time, ts *loopTimers) {
	w := l.work
	objects := l.cfg.Table.NumObjects(l.db.ReadTxn())
	l.status.dirty = l.status.dirty || w.dirty
	w.dirty = false
	l.status.reportFailing(l.health, now, objects, l.suspended(), wholeError{op: "prune", err: l.full.lastErr}, &ts.health,
		failingSet{n: w.failing, first: l.firstErrors})

	oldest := w.oldestPicked(now)

	s := l.baseSnapshot(now, &l.status, l.initialized)
	s.FailingDeletes = w.failingDeletes
	s.Retries = len(w.byDue.items)
	if next, ok := w.nextDue(); ok {
		s.NextRetry = next
	}
	s.Waiting, s.InFlight = len(w.active), w.running
	if len(w.active) > 0 {
		s.oldestSince = oldest
	}
	s.LastRound, s.LastFull = l.lastRound, l.lastFull
	pending, refreshing, errs := w.kinds[StatusKindPending], w.kinds[StatusKindRefreshing], w.kinds[StatusKindError]
	unowned := l.parkedLive
	s.Objects = ObjectCounts{
		Pending:    pending,
		Refreshing: refreshing,
		Error:      errs,
		Unowned:    unowned,
		Done:       max(0, objects-pending-refreshing-errs-unowned),
	}
	// The snapshot before the progress, the progress before the gauges:
	// whoever a wait wakes sees a Status() at least as new as what it
	// waited for, and whoever the metrics wake sees the progress too.
	l.snapshot.Store(s)
	l.progress.set(l.progressValues())
	l.metrics.Gauges(Gauges{
		Failing:       w.failing,
		Waiting:       len(w.active),
		InFlight:      w.running,
		Retries:       len(w.byDue.items),
		OldestWaiting: max(now.Sub(oldest), 0),
	})
}

// progressValues derives what the waits watch from the outstanding work.
func (l *loop[Obj]) progressValues() progressValues {
	w := l.work
	reconciled, retryLow := w.progress(l.readTo)
	v := progressValues{reconciled: reconciled, retryLow: retryLow}
	v.outstanding = len(w.active) + len(w.byDue.items)
	if w.blocked > 0 {
		v.blocked = l.blockedError()
	}
	if v.outstanding > 0 {
		v.oldest = l.oldestRequest()
	}
	return v
}

// blockedError is the error the waits return while misconfiguration
// holds objects back.
func (l *loop[Obj]) blockedError() error {
	for _, r := range l.work.byKey {
		if r.blocked && r.state == stHeld {
			return fmt.Errorf("%w: %d object(s) cannot be reconciled, e.g. %s: %s",
				ErrInvalidConfig, l.work.blocked, printableKey(r.key), r.err)
		}
	}
	return nil
}

// oldestRequest names the unsettled request with the lowest revision.
func (l *loop[Obj]) oldestRequest() oldestRequest {
	var oldest *request[Obj]
	for _, r := range l.work.active {
		if oldest == nil || r.askedAt < oldest.askedAt {
			oldest = r
		}
	}
	if items := l.work.byAsk.items; len(items) > 0 && (oldest == nil || items[0].askedAt < oldest.askedAt) {
		oldest = items[0]
	}
	if oldest == nil {
		return oldestRequest{}
	}
	what := "queued"
	switch {
	case oldest.deleted && oldest.state == stRetrying:
		what = "delete waiting for a retry"
	case oldest.deleted:
		what = "delete in flight"
	case oldest.state == stRetrying:
		what = "waiting for a retry"
	case oldest.state == stRunning:
		what = "in flight"
	}
	return oldestRequest{key: printableKey(oldest.key), what: what, err: oldest.err, attempts: oldest.attempts}
}

// firstErrors returns the failures of the smallest failing keys.
func (l *loop[Obj]) firstErrors(n int) []error {
	return firstErrors(n, func(yield func(key, err string) bool) {
		for k, r := range l.work.byKey {
			if r.err != "" && !yield(k, r.err) {
				return
			}
		}
	})
}

package reconciler

import (
	"fmt"
	"time"

	"github.com/converge-go/converge/reconciler/internal/clock"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
)

// A report publishes, after a step, what the outstanding work says: health,
// the status snapshot, the progress the waits watch and the gauges. Both
// loops report through publish; it walks the active requests once: work
// proportional to a round, not to the table.

// reportParts are what a loop adds to its outstanding work in a report.
type reportParts struct {
	readTo      statedb.Revision // the last revision read from the change iterator
	initialized bool
	inFlight    int             // operations executing (a running Sync counts one)
	unowned     int             // live objects another replica owns
	standby     bool            // a whole-set reconciler that does not lead: nothing is its work
	ownChanged  <-chan struct{} // the Ownership.Changed channel taken before the owned set was last looked at
	whole       wholeError
	lastRound   RoundInfo
	lastFull    FullInfo
	healthTimer *clock.Timer
}

func (r *reconciler[Obj]) publish(w *work[Obj], h *healthState, health cell.Health, now time.Time, p reportParts) {
	objects := r.cfg.Table.NumObjects(r.db.ReadTxn())
	h.dirty = h.dirty || w.dirty
	w.dirty = false
	failing := failingSet{n: w.failing, first: w.firstErrors}
	if p.standby {
		failing = failingSet{}
	}
	if r.shared.err != nil {
		p.whole = wholeError{op: "status", err: r.shared.err} // before any other: nothing is right while it holds
	}
	h.reportFailing(health, now, objects, r.suspended(), p.whole, p.healthTimer, failing)

	view := w.view(p.readTo, now)
	oldest := view.oldestPicked
	s := r.baseSnapshot(now, h, p.initialized)
	s.FailingDeletes = w.failingDeletes
	s.Retries = len(w.byDue.items)
	if next, ok := w.nextDue(); ok {
		s.NextRetry = next
	}
	s.Waiting, s.InFlight = len(w.active), p.inFlight
	if len(w.active) > 0 {
		s.oldestSince = oldest
	}
	s.LastRound, s.LastFull = p.lastRound, p.lastFull
	pending, refreshing, errs := w.kinds[StatusKindPending], w.kinds[StatusKindRefreshing], w.kinds[StatusKindError]
	s.Objects = ObjectCounts{
		Pending:    pending,
		Refreshing: refreshing,
		Error:      errs,
		Unowned:    p.unowned,
		Unset:      len(w.unset),
		Done:       max(0, objects-pending-refreshing-errs-p.unowned-len(w.unset)),
	}
	v := w.progressValues(view)
	gauges := Gauges{
		Failing:       w.failing,
		Waiting:       len(w.active),
		InFlight:      p.inFlight,
		Retries:       len(w.byDue.items),
		OldestWaiting: max(now.Sub(oldest), 0),
	}
	v.ownChanged = p.ownChanged
	if p.standby {
		// Kept warm for a takeover, but no one's work here.
		s.Objects = ObjectCounts{Unowned: objects}
		s.FailingDeletes, s.Retries, s.NextRetry, s.Waiting, s.oldestSince = 0, 0, time.Time{}, 0, time.Time{}
		v = progressValues{reconciled: p.readTo, retryLow: p.readTo + 1, ownChanged: p.ownChanged}
		gauges = Gauges{InFlight: p.inFlight}
	}
	// The snapshot before the progress, the progress before the gauges:
	// whoever a wait wakes sees a Status() at least as new as what it
	// waited for, and whoever the metrics wake sees the progress too.
	r.snapshot.Store(s)
	r.progress.set(v)
	r.metrics.Gauges(gauges)
}

// progressValues derives what the waits watch from the outstanding work.
func (w *work[Obj]) progressValues(view workView[Obj]) progressValues {
	v := progressValues{reconciled: view.reconciled, retryLow: view.retryLow}
	v.outstanding = len(w.active) + len(w.byDue.items)
	if w.blocked > 0 {
		v.blocked = w.blockedError()
	}
	if v.outstanding > 0 && view.oldest != nil {
		v.oldest = describeOldest(view.oldest)
	}
	return v
}

// blockedError is the error the waits return while misconfiguration
// holds objects back.
func (w *work[Obj]) blockedError() error {
	for _, r := range w.byKey {
		if r.blocked && r.state == stHeld {
			return fmt.Errorf("%w: %d object(s) cannot be reconciled, e.g. %s: %s",
				ErrInvalidConfig, w.blocked, printableKey(r.key), r.err)
		}
	}
	return nil
}

// describeOldest names the unsettled request with the lowest revision,
// for the waits' errors.
func describeOldest[Obj any](oldest *request[Obj]) oldestRequest {
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
	case oldest.state == stCommitting:
		what = "status being written"
	}
	return oldestRequest{key: printableKey(oldest.key), what: what, err: oldest.err, attempts: oldest.attempts}
}

// firstErrors returns the failures of the smallest failing keys.
func (w *work[Obj]) firstErrors(n int) []error {
	return firstErrors(n, func(yield func(key, err string) bool) {
		for k, r := range w.byKey {
			if r.err != "" && !yield(k, r.err) {
				return
			}
		}
	})
}

package reconciler

import (
	"time"

	"github.com/cilium/statedb"
)

// What the outstanding work says, for the reports: the waits' watermarks
// and the longest wait. Each walks the active requests only.

// progress derives the waits' watermarks: every change up to reconciled
// has been attempted, and retryLow is the lowest revision of a change not
// settled yet (reconciled+1 when none). readTo is the last revision read
// from the change iterator.
func (w *work[Obj]) progress(readTo statedb.Revision) (reconciled, retryLow statedb.Revision) {
	reconciled, retryLow = readTo, ^statedb.Revision(0)
	for _, r := range w.active {
		if !r.tried {
			reconciled = min(reconciled, r.askedAt-1)
		}
		retryLow = min(retryLow, r.askedAt)
	}
	if len(w.byAsk.items) > 0 {
		retryLow = min(retryLow, w.byAsk.items[0].askedAt)
	}
	return reconciled, min(retryLow, reconciled+1)
}

// oldestPicked is when the longest-waiting active request was queued.
func (w *work[Obj]) oldestPicked(now time.Time) time.Time {
	oldest := now
	for _, r := range w.active {
		if r.pickedAt.Before(oldest) {
			oldest = r.pickedAt
		}
	}
	return oldest
}

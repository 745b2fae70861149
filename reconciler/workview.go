package reconciler

import (
	"time"

	"github.com/cilium/statedb"
)

// What the outstanding work says, for the reports: the waits' watermarks,
// the longest wait and the oldest request, in one walk of the active
// requests (about a round's worth) and a look at the retry heaps' heads.

// workView is one report's reading of the outstanding work.
type workView[Obj any] struct {
	// Every change up to reconciled has been attempted; retryLow is the
	// lowest revision of a change not settled yet (reconciled+1 when
	// none).
	reconciled, retryLow statedb.Revision
	// oldestPicked is when the longest-waiting active request was queued.
	oldestPicked time.Time
	// oldest is the unsettled request with the lowest revision (nil: none).
	oldest *request[Obj]
}

// view reads the work as of now; readTo is the last revision read from
// the change iterator.
func (w *work[Obj]) view(readTo statedb.Revision, now time.Time) workView[Obj] {
	v := workView[Obj]{reconciled: readTo, retryLow: ^statedb.Revision(0), oldestPicked: now}
	oldest := -1
	for i := range w.marks {
		m := &w.marks[i]
		if !m.tried {
			v.reconciled = min(v.reconciled, m.askedAt-1)
		}
		if oldest < 0 || m.askedAt < w.marks[oldest].askedAt {
			oldest = i
		}
		if m.pickedAt.Before(v.oldestPicked) {
			v.oldestPicked = m.pickedAt
		}
	}
	if oldest >= 0 {
		v.oldest = w.active[oldest]
	}
	w.finishView(&v)
	return v
}

// finishView completes v, whose walk of the active requests is done,
// with the retry heaps' oldest request and the watermark it sets.
func (w *work[Obj]) finishView(v *workView[Obj]) {
	if items := w.byAsk.items; len(items) > 0 && (v.oldest == nil || items[0].askedAt < v.oldest.askedAt) {
		v.oldest = items[0]
	}
	if v.oldest != nil {
		v.retryLow = v.oldest.askedAt
	}
	v.retryLow = min(v.retryLow, v.reconciled+1)
}

package k8ssource

import (
	"fmt"
	"slices"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// rowState is what the writer reads of one table object it yields.
type rowState struct {
	kind reconciler.StatusKind
	err  string
}

// action is the next thing the writer does for one object.
type action uint8

const (
	actNone            action = iota
	actWrite                  // write plan.cond
	actCheck                  // ask the explainers about plan.check
	actAddFinalizer           // add the finalizer at plan.rv
	actRemoveFinalizer        // remove it at plan.rv
)

// plan is what desired decided for one object.
type plan[Obj comparable] struct {
	act    action
	cond   condition
	check  []retiredRow[Obj]
	rv     string
	forget bool // the object is gone: its bookkeeping can go too
}

// tableState is where an object's table objects stand.
type tableState uint8

const (
	tableReady   tableState = iota // every row reconciled (or failed), every retired row gone
	tablePending                   // a row is not committed or reconciled yet
	tableCheck                     // retired rows are gone from the table; their Deletes are to be confirmed
)

// desired decides what to do next for the object of key.
func (w *statusWriter[T, Obj]) desired(txn statedb.ReadTxn, key string, ks *keyState, now time.Time) plan[Obj] {
	item, known := w.tracker.snapshot(key)
	if !known {
		return plan[Obj]{forget: !ks.inflight}
	}
	if w.cfg.Owns != nil && !w.cfg.Owns(key) {
		ks.hasWritten = false
		return plan[Obj]{}
	}
	if w.fin != nil && !item.deleting && !item.finalized && ks.finalizerRV != item.rv {
		return plan[Obj]{act: actAddFinalizer, rv: item.rv}
	}
	c, state, check := w.fromTable(txn, key, &item)
	if state == tableCheck && !waiting(ks.cleanupWait) && w.fin != nil {
		return plan[Obj]{act: actCheck, check: check}
	}
	if p, ok := w.cleanupPlan(key, ks, &item, state); ok {
		return p
	}
	c, ok := w.conditionOf(ks, &item, c, state)
	if !ok || item.seen.matches(c, w.fields.stalled, w.fields.observedGeneration) || (ks.hasWritten && ks.written.same(c)) {
		return plan[Obj]{}
	}
	c.LastTransitionTime = now
	if item.seen.hasCond && item.seen.cond.Status == c.Status {
		c.LastTransitionTime = item.seen.cond.LastTransitionTime
	}
	return plan[Obj]{act: actWrite, cond: c}
}

// cleaningUp reports whether item is being deleted and held by the
// source's finalizer.
func (w *statusWriter[T, Obj]) cleaningUp(item *itemState[T, Obj]) bool {
	return w.fin != nil && item.deleting && item.finalized
}

// cleanupPlan is the next step of the cleanup of an object being
// deleted with the finalizer, if it has one: the finalizer's removal
// once its table objects are gone and their Deletes confirmed, or a
// second read of an object whose staged rows are in the table.
func (w *statusWriter[T, Obj]) cleanupPlan(key string, ks *keyState, item *itemState[T, Obj], state tableState) (plan[Obj], bool) {
	if !w.cleaningUp(item) || state != tableReady {
		return plan[Obj]{}, false
	}
	switch {
	case len(item.yielded) == 0 && item.phase == cleanupDeleting:
		if ks.finalizerRV == item.rv {
			return plan[Obj]{}, true // removed: the delete event follows
		}
		return plan[Obj]{act: actRemoveFinalizer, rv: item.rv}, true
	case item.phase == cleanupStaged && !ks.reemitted:
		w.stagedIn(key, item)
		ks.reemitted = true
		return plan[Obj]{}, true
	}
	return plan[Obj]{}, false
}

// conditionOf is the condition of item, given c, the one its table
// objects make, and where they stand; false when the condition it has
// stays.
func (w *statusWriter[T, Obj]) conditionOf(ks *keyState, item *itemState[T, Obj], c condition, state tableState) (condition, bool) {
	switch {
	case w.cleaningUp(item) && ks.cleanupErr != "":
		return condition{Status: "False", Reason: ReasonCleanupFailed, Message: ks.cleanupErr, ObservedGeneration: item.gen}, true
	case w.cleaningUp(item):
		return condition{Status: "False", Reason: ReasonCleaningUp, Message: "deleting its table objects", ObservedGeneration: item.gen}, true
	case item.failed:
		return condition{Status: "False", Reason: ReasonTransformFailed, Message: item.failErr, ObservedGeneration: item.gen}, true
	case item.conflict != "":
		return condition{Status: "False", Reason: ReasonConflict, Message: item.conflict, ObservedGeneration: item.gen}, true
	case ks.cleanupErr != "" && state == tableCheck:
		return condition{Status: "False", Reason: ReasonCleanupFailed, Message: ks.cleanupErr, ObservedGeneration: item.yieldedGen}, true
	case state == tableReady:
		return c, true
	case item.seen.hasCond || ks.hasWritten:
		return condition{}, false // its condition stays until the outcome
	}
	return condition{Status: "False", Reason: ReasonReconciling, Message: "reconciling", ObservedGeneration: item.yieldedGen}, true
}

// waiting reports whether ch is open: the last check is still current.
func waiting(ch <-chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return false
	default:
		return true
	}
}

// stagedIn moves the cleanup of key past staging (its rows are in the
// table), and has the source read it again, to yield nothing.
func (w *statusWriter[T, Obj]) stagedIn(key string, item *itemState[T, Obj]) {
	w.tracker.mu.Lock()
	if st := w.tracker.items[key]; st != nil && st.phase == cleanupStaged {
		st.phase = cleanupDeleting
	}
	w.tracker.mu.Unlock()
	w.reemit(key, item.obj)
}

// fromTable is the condition of the object of key from the table, and
// where its table objects stand: pending while one of them is not in
// the table as Transform yielded it, or waits to be reconciled, or one
// it no longer yields is still there; check while the Deletes of those
// are to be confirmed (with explainers).
func (w *statusWriter[T, Obj]) fromTable(txn statedb.ReadTxn, key string, item *itemState[T, Obj]) (condition, tableState, []retiredRow[Obj]) {
	idx := w.table.PrimaryIndexer()
	rows := make([]rowState, 0, len(item.yielded))
	pending := false
	for i, y := range item.yielded {
		q, ok := idx.QueryFromObject(y)
		if !ok {
			pending = true
			continue
		}
		row, _, found := w.table.Get(txn, q)
		if !found || !w.tracker.equal(y, row) {
			// Not committed yet, or another writer's row of the same
			// key: not this object's to report.
			pending = true
			continue
		}
		if row != y {
			w.tracker.own(key, i, y, row)
		}
		st := w.cfg.GetObjectStatus(row)
		rows = append(rows, rowState{kind: st.Kind, err: st.Error})
	}
	var gone []Obj
	var check []retiredRow[Obj]
	for _, r := range item.retired {
		if q, ok := idx.QueryFromObject(r.obj); ok {
			if row, _, found := w.table.Get(txn, q); found && w.tracker.equal(r.obj, row) {
				pending = true // its delete is not committed yet
				continue
			}
		}
		gone = append(gone, r.obj)
		if r.goneAt == 0 {
			r.goneAt = w.table.Revision(txn)
		}
		check = append(check, r)
	}
	if len(gone) > 0 {
		w.tracker.gone(key, gone, w.table.Revision(txn), w.fin == nil)
	}
	c, ok := fromRows(rows)
	c.ObservedGeneration = item.yieldedGen
	switch {
	case pending || !ok:
		return c, tablePending, nil
	case len(check) > 0 && w.fin != nil:
		return c, tableCheck, check
	}
	return c, tableReady, nil
}

// fromRows is the condition of a Kubernetes object whose table objects
// are rows; false while one of them waits to be reconciled. A failure
// is reported before an Unset row, which is never reported as reconciled;
// no rows at all is nothing to do.
func fromRows(rows []rowState) (condition, bool) {
	var errs []string
	unset := false
	for _, r := range rows {
		switch r.kind {
		case reconciler.StatusKindPending, reconciler.StatusKindRefreshing:
			return condition{}, false
		case reconciler.StatusKindError:
			// Each cut before it is sorted: the loop's work on one
			// object is bounded by maxInput bytes per error.
			errs = append(errs, cutUTF8(r.err, maxInput))
		case reconciler.StatusKindUnset:
			unset = true
		}
	}
	switch {
	case len(errs) > 0:
		slices.Sort(errs)
		errs = slices.Compact(errs)
		return condition{Status: "False", Reason: ReasonReconcileFailed, Message: sanitize(joinMessages(errs))}, true
	case unset:
		return condition{Status: "False", Reason: ReasonNotReconciled, Message: "not to be reconciled yet (status Unset)"}, true
	case len(rows) == 0:
		return condition{Status: "True", Reason: ReasonReconciled, Message: "nothing to reconcile: the object yields no table objects"}, true
	}
	return condition{Status: "True", Reason: ReasonReconciled, Message: fmt.Sprintf("%d table object(s) reconciled", len(rows))}, true
}

package k8ssource

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// rowState is what the writer reads of one table object it yields.
type rowState struct {
	kind reconciler.StatusKind
	err  string
}

// desired computes the condition of key and whether it must be written;
// forget says the object is gone and its bookkeeping can go too.
func (w *statusWriter[T, Obj]) desired(txn statedb.ReadTxn, key string, ks *keyState, now time.Time) (c condition, write, forget bool) {
	item, known := w.tracker.snapshot(key)
	if !known {
		return condition{}, false, !ks.inflight
	}
	if w.cfg.Owns != nil && !w.cfg.Owns(key) {
		ks.hasWritten = false
		return condition{}, false, false
	}
	var ok bool
	if item.failed {
		c = condition{Status: "False", Reason: ReasonTransformFailed, Message: item.failErr, ObservedGeneration: item.gen}
	} else if c, ok = w.fromTable(txn, key, &item); !ok {
		if item.seen.hasCond || ks.hasWritten {
			return condition{}, false, false // its condition stays until the outcome
		}
		c = condition{Status: "False", Reason: ReasonReconciling, Message: "reconciling", ObservedGeneration: item.yieldedGen}
	}
	if item.seen.matches(c, w.fields.stalled, w.fields.observedGeneration) {
		return condition{}, false, false
	}
	if ks.hasWritten && ks.written.same(c) {
		return condition{}, false, false
	}
	c.LastTransitionTime = now
	if item.seen.hasCond && item.seen.cond.Status == c.Status {
		c.LastTransitionTime = item.seen.cond.LastTransitionTime
	}
	return c, true, false
}

// fromTable is the condition of the object of key from the table: false
// while one of its objects is not in the table as Transform yielded it,
// or waits to be reconciled, or one it no longer yields is still there.
func (w *statusWriter[T, Obj]) fromTable(txn statedb.ReadTxn, key string, item *itemState[Obj]) (condition, bool) {
	idx := w.table.PrimaryIndexer()
	rows := make([]rowState, 0, len(item.yielded))
	for i, y := range item.yielded {
		q, ok := idx.QueryFromObject(y)
		if !ok {
			return condition{}, false
		}
		row, _, found := w.table.Get(txn, q)
		if !found || !w.tracker.equal(y, row) {
			// Not committed yet, or another writer's row of the same
			// key: not this object's to report.
			return condition{}, false
		}
		if row != y {
			w.tracker.own(key, i, y, row)
		}
		st := w.cfg.GetObjectStatus(row)
		rows = append(rows, rowState{kind: st.Kind, err: st.Error})
	}
	var gone []Obj
	for _, r := range item.retired {
		q, ok := idx.QueryFromObject(r)
		if !ok {
			gone = append(gone, r)
			continue
		}
		row, _, found := w.table.Get(txn, q)
		if found && w.tracker.equal(r, row) {
			return condition{}, false // its delete is not committed yet
		}
		gone = append(gone, r)
	}
	if len(gone) > 0 {
		w.tracker.gone(key, gone)
	}
	c, ok := fromRows(rows)
	c.ObservedGeneration = item.yieldedGen
	return c, ok
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
			errs = append(errs, r.err)
		case reconciler.StatusKindUnset:
			unset = true
		}
	}
	switch {
	case len(errs) > 0:
		slices.Sort(errs)
		errs = slices.Compact(errs)
		return condition{Status: "False", Reason: ReasonReconcileFailed, Message: sanitize(strings.Join(errs, "; "))}, true
	case unset:
		return condition{Status: "False", Reason: ReasonNotReconciled, Message: "not to be reconciled yet (status Unset)"}, true
	case len(rows) == 0:
		return condition{Status: "True", Reason: ReasonReconciled, Message: "nothing to reconcile: the object yields no table objects"}, true
	}
	return condition{Status: "True", Reason: ReasonReconciled, Message: fmt.Sprintf("%d table object(s) reconciled", len(rows))}, true
}

package k8ssource

import (
	"cmp"
	"context"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// rowState is what the writer keeps of one table object: enough to
// compute its Kubernetes object's condition without reading the table.
type rowState struct {
	kind reconciler.StatusKind
	err  string
	gen  int64
}

// keyState is the writer's bookkeeping of one Kubernetes object.
type keyState struct {
	rows       map[string]rowState // by the table object's primary key
	inflight   bool
	lastWrite  time.Time
	tokens     float64   // write tokens left right after lastWrite
	notBefore  time.Time // backoff after a failure
	attempts   int
	written    condition
	hasWritten bool
	err        error // the current failure, for health; nil for conflicts
}

// writeResult is what a worker reports back to the loop.
type writeResult struct {
	key  string
	cond condition
	err  error
}

// statusWriter is the job that writes Reconciled conditions. Its loop
// owns every keyState; workers only send an apply and report.
type statusWriter[T Object, Obj comparable] struct {
	cfg     StatusConfig[T, Obj]
	db      *statedb.DB
	table   statedb.Table[Obj]
	log     *slog.Logger
	tracker *tracker[T]
	keys    map[string]*keyState
	// dirty are the keys whose condition must be looked at again.
	dirty    map[string]struct{}
	inflight int
	health   cell.Health
	// stats count what the writer did, for its health message.
	stats writerStats
}

// writerStats counts what the writer did.
type writerStats struct {
	Writes, Conflicts, NotFound, Failures uint64
}

func newStatusWriter[T Object, Obj comparable](cfg StatusConfig[T, Obj], table statedb.RWTable[Obj], p source.Params) (*statusWriter[T, Obj], error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if table == nil {
		return nil, errTableRequired
	}
	conds, err := cfg.conditionsReader()
	if err != nil {
		return nil, err
	}
	return &statusWriter[T, Obj]{
		cfg:     cfg,
		db:      p.DB,
		table:   table,
		log:     p.Log.With("k8s-status", cfg.Resource.Resource),
		tracker: newTracker(conds),
		keys:    map[string]*keyState{},
		dirty:   map[string]struct{}{},
	}, nil
}

func (w *statusWriter[T, Obj]) state(key string) *keyState {
	ks := w.keys[key]
	if ks == nil {
		ks = &keyState{}
		w.keys[key] = ks
	}
	return ks
}

// run is the job: follow the table's changes and the tracker's, and
// write the conditions that changed, until ctx ends.
func (w *statusWriter[T, Obj]) run(ctx context.Context, health cell.Health) error {
	w.health = health
	wtxn := w.db.WriteTxn(w.table)
	changes, err := w.table.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		return err
	}
	defer changes.Close()
	results := make(chan writeResult, w.cfg.Workers)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	health.OK("OK, no status written yet")
	var ownsChanged <-chan struct{}
	for {
		if ownsChanged == nil && w.cfg.OwnsChanged != nil {
			ownsChanged = w.cfg.OwnsChanged()
		}
		seq, watch := changes.Next(w.db.ReadTxn())
		for ch := range seq {
			w.change(ch)
		}
		for key := range w.tracker.takeDirty() {
			// The object's condition changed (or its Transform result):
			// what it carries now is the truth, not what was last written,
			// so a condition someone else changed is written again.
			w.state(key).hasWritten = false
			w.dirty[key] = struct{}{}
		}
		next := w.dispatch(ctx, results)
		timer.Reset(max(time.Until(next), 0))
		select {
		case <-ctx.Done():
			for ; w.inflight > 0; w.inflight-- {
				<-results
			}
			return nil
		case <-watch:
		case <-w.tracker.notify:
		case <-timer.C:
		case <-ownsChanged:
			ownsChanged = nil
			for key := range w.keys {
				w.dirty[key] = struct{}{}
			}
		case r := <-results:
			w.inflight--
			w.finish(r)
		}
	}
}

// change applies one table change to the bookkeeping.
func (w *statusWriter[T, Obj]) change(ch statedb.Change[Obj]) {
	key := w.cfg.ItemKey(ch.Object)
	pk, ok := w.table.PrimaryIndexer().ObjectToKey(ch.Object)
	if !ok {
		return
	}
	ks := w.state(key)
	if ch.Deleted {
		delete(ks.rows, string(pk))
		if len(ks.rows) == 0 && !ks.inflight {
			delete(w.keys, key)
			return
		}
		w.dirty[key] = struct{}{}
		return
	}
	st := w.cfg.GetObjectStatus(ch.Object)
	if ks.rows == nil {
		ks.rows = map[string]rowState{}
	}
	ks.rows[string(pk)] = rowState{kind: st.Kind, err: st.Error, gen: w.cfg.Generation(ch.Object)}
	w.dirty[key] = struct{}{}
}

// dispatch starts the writes that are due, and returns when the next
// postponed one is.
func (w *statusWriter[T, Obj]) dispatch(ctx context.Context, results chan<- writeResult) time.Time {
	now := time.Now()
	next := now.Add(time.Hour)
	for key := range w.dirty {
		ks := w.keys[key]
		if ks == nil {
			delete(w.dirty, key)
			continue
		}
		if ks.inflight {
			continue // finish marks it dirty again
		}
		due := w.rateDue(ks, now)
		if ks.notBefore.After(due) {
			due = ks.notBefore
		}
		if due.After(now) {
			if due.Before(next) {
				next = due
			}
			continue
		}
		if w.inflight >= w.cfg.Workers {
			return next // a result wakes the loop before any timer
		}
		delete(w.dirty, key)
		cond, write := w.desired(key, ks, now)
		if !write {
			continue
		}
		ks.inflight = true
		w.inflight++
		go func() { results <- writeResult{key: key, cond: cond, err: w.apply(ctx, key, cond)} }()
	}
	return next
}

// desired computes the condition of key and whether it must be written.
func (w *statusWriter[T, Obj]) desired(key string, ks *keyState, now time.Time) (condition, bool) {
	if w.cfg.Owns != nil && !w.cfg.Owns(key) {
		ks.hasWritten = false
		return condition{}, false
	}
	item := w.tracker.get(key)
	var c condition
	switch {
	case item.failed:
		c = condition{Status: "False", Reason: ReasonTransformFailed, Message: item.failErr, ObservedGeneration: item.failGen}
	case len(ks.rows) == 0:
		// Nothing to report (the object yields nothing, or is gone), or
		// its objects are not committed yet: their change brings it back.
		delete(w.keys, key)
		return condition{}, false
	default:
		var ok bool
		if c, ok = fromRows(ks.rows); !ok {
			return condition{}, false
		}
	}
	if item.hasSeen && item.seen.same(c) {
		return condition{}, false
	}
	if ks.hasWritten && ks.written.same(c) {
		return condition{}, false
	}
	c.LastTransitionTime = now
	if item.hasSeen && item.seen.Status == c.Status {
		c.LastTransitionTime = item.seen.LastTransitionTime
	}
	return c, true
}

// fromRows is the condition of a Kubernetes object whose table objects
// are rows; false while one of them waits to be reconciled. A failure
// is reported before an Unset row, which is never reported as reconciled.
func fromRows(rows map[string]rowState) (condition, bool) {
	gen := int64(-1)
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
		if gen < 0 || r.gen < gen {
			gen = r.gen
		}
	}
	if len(errs) > 0 {
		slices.Sort(errs)
		return condition{Status: "False", Reason: ReasonReconcileFailed, Message: truncate(strings.Join(errs, "; ")), ObservedGeneration: gen}, true
	}
	if unset {
		return condition{Status: "False", Reason: ReasonNotReconciled, Message: "not to be reconciled yet (status Unset)", ObservedGeneration: gen}, true
	}
	return condition{Status: "True", Reason: ReasonReconciled, Message: "reconciled", ObservedGeneration: gen}, true
}

// tokens returns the write tokens of ks at now: one more per
// MinInterval since its last write, up to Burst.
func (w *statusWriter[T, Obj]) tokens(ks *keyState, now time.Time) float64 {
	if ks.lastWrite.IsZero() {
		return float64(w.cfg.Burst)
	}
	return min(ks.tokens+float64(now.Sub(ks.lastWrite))/float64(w.cfg.MinInterval), float64(w.cfg.Burst))
}

// rateDue is when ks has a token to write with.
func (w *statusWriter[T, Obj]) rateDue(ks *keyState, now time.Time) time.Time {
	if w.tokens(ks, now) >= 1 {
		return now
	}
	return ks.lastWrite.Add(time.Duration((1 - ks.tokens) * float64(w.cfg.MinInterval)))
}

// nextBackoff is the wait before attempt n+1 of a failed write.
func (w *statusWriter[T, Obj]) nextBackoff(attempts int) time.Duration {
	d := w.cfg.BackoffMin
	for i := 1; i < attempts && d < w.cfg.BackoffMax; i++ {
		d *= 2
	}
	return min(d, w.cfg.BackoffMax)
}

// sortedErrors returns the current failures, by key.
func (w *statusWriter[T, Obj]) sortedErrors() []error {
	type ke struct {
		key string
		err error
	}
	var all []ke
	for k, ks := range w.keys {
		if ks.err != nil {
			all = append(all, ke{k, ks.err})
		}
	}
	slices.SortFunc(all, func(a, b ke) int { return cmp.Compare(a.key, b.key) })
	out := make([]error, len(all))
	for i, e := range all {
		out[i] = e.err
	}
	return out
}

package k8ssource

import (
	"context"
	"log/slog"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/source"
)

// keyState is the writer's bookkeeping of one Kubernetes object.
type keyState struct {
	inflight   bool
	lastWrite  time.Time
	tokens     float64   // write tokens left right after lastWrite
	notBefore  time.Time // backoff after a failure
	attempts   int
	written    condition
	hasWritten bool
	err        error // the current failure, for health; nil for conflicts
	events     eventState
	// cleanupErr is why Deletes of its retired rows fail ("" when none
	// does); cleanupWait, while not closed, says the last check is still
	// current; reemitted that the staged object was read again.
	cleanupErr  string
	cleanupWait <-chan struct{}
	reemitted   bool
	// finalizerRV is the resourceVersion the last successful patch of the
	// finalizer was made at: not patched again before the object changes.
	finalizerRV string
	// stuckSince is when the object was deleted, while a failing cleanup
	// holds it (stuck.go), zero otherwise; stuckSeen when that was seen.
	stuckSince, stuckSeen time.Time
}

// writeResult is what a worker reports back to the loop.
type writeResult[Obj comparable] struct {
	key   string
	cond  condition
	check bool         // a dry-run apply that checks the resource (check.go)
	err   error        // the apply's
	unfit error        // check: what is wrong with the resource
	ref   *eventTarget // the object as the server answered, for Events
	took  time.Duration
	// finalizer: a patch of the finalizer, made at rv; cleanup: a check
	// of the Deletes of retired rows (cleanup.go).
	finalizer bool
	rv        string
	cleanup   *cleanupResult[Obj]
}

// statusWriter is the job that writes the conditions. Its loop owns
// every keyState; workers only send an apply and report.
type statusWriter[T Object, Obj comparable] struct {
	cfg     StatusConfig[T, Obj]
	fields  *statusFields
	db      *statedb.DB
	table   statedb.Table[Obj]
	log     *slog.Logger
	tracker *tracker[T, Obj]
	metrics StatusMetrics
	events  *eventSink
	// fin is the finalizer's state (nil without one); reemit has the
	// source read an object again (ListerWatcher.reemit).
	fin    *finalizing[T, Obj]
	reemit func(key string, obj T)
	keys   map[string]*keyState
	// dirty are the keys whose condition must be looked at again.
	dirty    map[string]struct{}
	inflight int
	health   cell.Health
	// stats count what the writer did, for its health message; stuck
	// are the objects a failing cleanup holds.
	stats writerStats
	stuck stuckStats
	// fit: the resource was found fit for the writes (check.go);
	// checking: a check is in flight; fitErr why it is not fit (or could
	// not be checked), checkAt when to check again.
	fit, checking bool
	fitErr        error
	checkAt       time.Time
	checkAttempts int
}

// writerStats counts what the writer did.
type writerStats struct {
	Writes, Conflicts, NotFound, Failures uint64
}

func newStatusWriter[T Object, Obj comparable](cfg StatusConfig[T, Obj], sc *source.Config[T, Obj], p source.Params) (*statusWriter[T, Obj], error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if sc.Table == nil {
		return nil, errTableRequired
	}
	if sc.Equal == nil {
		return nil, errEqualRequired
	}
	w := &statusWriter[T, Obj]{
		cfg:     cfg,
		fields:  cfg.fields(),
		db:      p.DB,
		table:   sc.Table,
		log:     p.Log.With("k8s-status", cfg.Resource.Resource),
		tracker: newTracker(cfg.observer(), sc.Table, sc.Equal),
		keys:    map[string]*keyState{},
		dirty:   map[string]struct{}{},
		metrics: nopStatusMetrics{},
	}
	m := cfg.Metrics
	if m == nil {
		m, _ = p.DefaultMetrics.(Metrics)
	}
	if m != nil {
		w.metrics = m.StatusWriter(source.ID{ModuleID: p.ModuleID.String(), Name: sc.Name})
	}
	if cfg.Events != nil && cfg.EventTypes != EventsNone {
		w.events = newEventSink(cfg.Events, cfg.FieldManager)
	}
	return w, nil
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
	if w.events != nil {
		w.events.start()
		defer w.events.stop()
	}
	results := make(chan writeResult[Obj], w.cfg.Workers+1)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	health.OK("OK, no status written yet")
	var ownsChanged <-chan struct{}
	for {
		if ownsChanged == nil && w.cfg.OwnsChanged != nil {
			ownsChanged = w.cfg.OwnsChanged()
		}
		txn := w.db.ReadTxn()
		seq, watch := changes.Next(txn)
		for ch := range seq {
			key := w.cfg.ItemKey(ch.Object)
			w.dirty[key] = struct{}{}
			if ch.Deleted && w.fin != nil {
				w.tracker.rowDeleted(key, ch.Object, ch.Revision)
			}
		}
		for key := range w.tracker.takeDirty() {
			// The object changed (or its Transform result): what it
			// carries now is the truth, not what was last written, so a
			// condition someone else changed is written again.
			w.state(key).hasWritten = false
			w.dirty[key] = struct{}{}
		}
		next := w.dispatch(ctx, w.db.ReadTxn(), results)
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
			for _, key := range w.tracker.keys() {
				w.dirty[key] = struct{}{}
			}
		case r := <-results:
			w.inflight--
			w.finish(r)
		}
	}
}

// dispatch starts the writes that are due, and returns when the next
// postponed one is.
func (w *statusWriter[T, Obj]) dispatch(ctx context.Context, txn statedb.ReadTxn, results chan<- writeResult[Obj]) time.Time {
	now := time.Now()
	next := now.Add(time.Hour)
	if !w.fit && (w.checking || w.checkAt.After(now)) {
		if !w.checking {
			next = w.checkAt
		}
		return next
	}
	for key := range w.dirty {
		ks := w.keys[key]
		if ks == nil {
			ks = w.state(key)
		}
		if ks.inflight {
			continue // finish marks it dirty again
		}
		if ks.notBefore.After(now) {
			next = earlier(next, ks.notBefore)
			continue
		}
		p := w.desired(txn, key, ks, now)
		if p.forget {
			delete(w.dirty, key)
			delete(w.keys, key)
			w.forgetStuck(ks)
			continue
		}
		if p.act == actNone {
			delete(w.dirty, key)
			continue
		}
		if p.act == actWrite && !w.exempt(ks, p.cond) {
			if due := w.rateDue(ks, now); due.After(now) {
				next = earlier(next, due)
				continue
			}
		}
		if w.inflight >= w.cfg.Workers {
			return next // a result wakes the loop before any timer
		}
		delete(w.dirty, key)
		ks.inflight = true
		w.inflight++
		if p.act == actWrite && !w.fit {
			// The first write waits for the check of the resource, which
			// is a dry run of that same write.
			w.checking = true
			go func() { results <- w.check(ctx, key, p.cond) }()
			return next
		}
		go func() { results <- w.act(ctx, key, p) }()
	}
	return next
}

// act carries out plan p for key, on a worker.
func (w *statusWriter[T, Obj]) act(ctx context.Context, key string, p plan[Obj]) writeResult[Obj] {
	switch p.act {
	case actCheck:
		return w.checkCleanup(ctx, key, p.check)
	case actAddFinalizer, actRemoveFinalizer:
		r := w.patchFinalizer(ctx, key, p.rv, p.act == actAddFinalizer)
		r.rv = p.rv
		return r
	}
	return w.write(ctx, key, p.cond)
}

func earlier(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// exempt reports whether writing c to ks takes no token: the first
// condition of a new generation (its Reconciling, and the outcome that
// follows), so that a user's apply, wait, apply again is never paced.
func (w *statusWriter[T, Obj]) exempt(ks *keyState, c condition) bool {
	if !ks.hasWritten && ks.lastWrite.IsZero() {
		return true // the tokens are full anyway
	}
	return c.ObservedGeneration > ks.written.ObservedGeneration ||
		(c.ObservedGeneration == ks.written.ObservedGeneration && ks.written.Reason == ReasonReconciling && c.Reason != ReasonReconciling)
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

package k8ssource

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// The Deletes of the rows an object no longer yields (all of them, when
// it is being deleted with the finalizer) are confirmed with the
// explainers, the reconcilers' own account, never by a bookkeeping of
// deletes beside it: the Delete of a row deleted from the table at
// revision R has succeeded for a reconciler once its answer has ReadTo
// >= R and State KeyAbsent. While it is not, the writer waits for the
// answer's Changed, not on a timer.

// cleanupResult is what a check of retired rows found.
type cleanupResult[Obj comparable] struct {
	confirmed []Obj    // the rows every explainer reported deleted
	failing   []string // the last errors of Deletes that fail
	changed   <-chan struct{}
}

// checkCleanup asks every explainer about each of rows.
func (w *statusWriter[T, Obj]) checkCleanup(ctx context.Context, key string, rows []retiredRow[Obj]) writeResult[Obj] {
	idx := w.table.PrimaryIndexer()
	res := &cleanupResult[Obj]{}
	var changed []<-chan struct{}
	var errs []error
	for _, r := range rows {
		pk, ok := idx.ObjectToKey(r.obj)
		if !ok {
			res.confirmed = append(res.confirmed, r.obj)
			continue
		}
		done := true
		for _, e := range w.fin.cfg.Explainers {
			ex, err := e.Explain(ctx, pk)
			if err != nil {
				errs = append(errs, err)
				done = false
				continue
			}
			changed = append(changed, ex.Changed)
			if ex.ReadTo >= r.goneAt && ex.State == reconciler.KeyAbsent {
				continue
			}
			done = false
			if ex.Deleted && ex.LastError != "" {
				res.failing = append(res.failing, cutUTF8(ex.LastError, maxInput))
			}
		}
		if done {
			res.confirmed = append(res.confirmed, r.obj)
		}
	}
	res.changed = anyClosed(ctx, changed)
	return writeResult[Obj]{key: key, cleanup: res, err: errors.Join(errs...)}
}

// anyClosed returns a channel closed when one of chs is, or ctx ends.
func anyClosed(ctx context.Context, chs []<-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	if len(chs) == 0 {
		return out
	}
	var once sync.Once
	fire := func() { once.Do(func() { close(out) }) }
	for _, ch := range chs {
		go func() {
			select {
			case <-ch:
			case <-ctx.Done():
			case <-out:
			}
			fire()
		}()
	}
	return out
}

// cleaned records the outcome of a check of key's retired rows: the
// rows confirmed are forgotten; while others fail their errors are the
// condition's; the key is looked at again when an explainer's state
// changes.
func (w *statusWriter[T, Obj]) cleaned(r writeResult[Obj], ks *keyState) {
	res := r.cleanup
	w.tracker.confirmed(r.key, res.confirmed)
	slices.Sort(res.failing)
	ks.cleanupErr = sanitize(joinMessages(slices.Compact(res.failing)))
	ks.cleanupWait = res.changed
	if r.err != nil {
		// An explainer not running yet (or any more): asked again after
		// backoff.
		ks.attempts++
		ks.notBefore = time.Now().Add(w.nextBackoff(ks.attempts))
		ks.cleanupWait = nil
	}
	key := r.key
	if ch := ks.cleanupWait; ch != nil {
		go func() {
			<-ch
			w.tracker.mark(key)
		}()
	}
	w.stuckCleanup(key, ks)
}

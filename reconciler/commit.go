package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/statedb"
)

// commit writes the results of the finished tasks in one write transaction.
// Each status write is a compare-and-swap on the revision the operation
// saw: if the object changed meanwhile, the result is stale and dropped, and
// the change iterator delivers the newer revision to a later round. The one
// exception is a change that left this reconciler's pending request alone
// (same status ID and kind: another reconciler of a StatusSet wrote its
// status), where the result is merged into the newer object instead.
func (l *loop[Obj]) commit(ctx context.Context, ts *loopTimers) {
	l.taken = l.results.take(l.taken)
	start := time.Now()
	now := start
	wtxn := l.db.WriteTxn(l.cfg.Table)
	defer wtxn.Abort()

	objects := 0
	done := l.done
	for i := range l.taken {
		t := &l.taken[i]
		switch t.op {
		case OpUpdate, OpDelete:
			l.commitItem(wtxn, t.one, now)
			done = append(done, t.one)
			objects++
		case OpUpdateBatch, OpDeleteBatch:
			for _, it := range t.batch {
				l.commitItem(wtxn, it, now)
				done = append(done, it)
			}
			objects += len(t.batch)
		case OpPrune:
			l.pruneDone(t, now, ts)
		}
	}
	if ctx.Err() != nil {
		// Stopping: write nothing after Stop.
		return
	}
	wtxn.Commit()
	clear(l.taken)

	if objects > 0 {
		d := time.Since(l.roundStart(done))
		l.metrics.Round(objects, d)
		l.lastRound = RoundInfo{At: now, Objects: objects, Duration: d}
	}
	// The keys are free again; handle what changed while they were busy.
	for _, it := range done {
		delete(l.busy, it.key)
		if it.hasNext && !l.sameRequest(it) {
			l.onChange(it.next, it.nextFloor)
		}
		l.release(it)
	}
	clear(done)
	l.done = done[:0]
}

// sameRequest reports whether the change seen while it was busy carries the
// very request it just reconciled: another reconciler's status write on a
// shared object, seen before our own write. Handling it again would repeat
// the operation for nothing.
func (l *loop[Obj]) sameRequest(it *item[Obj]) bool {
	if it.next.deleted || it.deleted || it.status.ID == 0 {
		return false
	}
	st := l.cfg.GetObjectStatus(it.next.obj)
	return st.ID == it.status.ID && st.Kind == it.status.Kind
}

// roundStart is when the oldest of the committed items was picked up.
func (l *loop[Obj]) roundStart(done []*item[Obj]) time.Time {
	oldest := time.Now()
	for _, it := range done {
		if it.pickedAt.Before(oldest) {
			oldest = it.pickedAt
		}
	}
	return oldest
}

// commitItem records one object's result in wtxn and schedules its retry.
func (l *loop[Obj]) commitItem(wtxn statedb.WriteTxn, it *item[Obj], now time.Time) {
	if it.deleted {
		l.commitDelete(wtxn, it, now)
		return
	}
	err := it.err
	if isDeferral(err) {
		// Not ready yet, not a failure: the status stays Pending.
		d, _ := retryAfter(err)
		l.scheduleRetry(it, it.rev, it.failures, true, now.Add(d))
		return
	}
	giveUp := false
	if err != nil {
		err, giveUp = l.failure(it)
	}
	if !it.cloned {
		// There is no copy to write the status into (CloneObject
		// panicked or returned the object itself): report, do not touch
		// the table.
		l.configFailure(it, err, giveUp, now)
		return
	}
	st := Status{Kind: StatusKindDone, UpdatedAt: now}
	if err != nil {
		st = Status{Kind: StatusKindError, UpdatedAt: now, Error: err.Error()}
	}
	l.breaker.observe(err == nil, giveUp, st.Error, it.failures > 0, now, l.backoff)
	if err != nil && it.status.Kind == StatusKindError && it.status.Error == st.Error {
		// A retry failed as the last attempt did, and the object says so
		// already: skip the write (and the change it would echo back to
		// us). In a retry storm this is most of the work. If the object
		// changed meanwhile, the change iterator delivers it and that
		// drops the retry scheduled here.
		l.scheduleRetry(it, it.rev, it.failures+1, false, now.Add(l.retryDelay(it)))
		return
	}
	switch l.writeStatus(wtxn, it, st) {
	case statusStale:
		return // a newer revision follows
	case statusKeyChanged:
		err = fmt.Errorf("%w: Config.SetObjectStatus changed the object's primary key", ErrInvalidConfig)
		l.configFailure(it, err, true, now)
		return
	}
	switch {
	case err == nil:
		l.status.clearFailing(it.key)
	case giveUp:
		l.status.setFailing(it.key, err.Error(), false, now)
	default:
		l.status.setFailing(it.key, err.Error(), false, now)
		l.scheduleRetry(it, it.rev, it.failures+1, false, now.Add(l.retryDelay(it)))
	}
}

// failure wraps an item's error for its status and reports whether the
// object is given up on (Permanent, or MaxRetries spent).
func (l *loop[Obj]) failure(it *item[Obj]) (error, bool) {
	err := it.err
	if IsPermanent(err) || errors.Is(err, ErrInvalidConfig) {
		return err, true
	}
	if l.cfg.MaxRetries > 0 && it.failures+1 >= l.cfg.MaxRetries {
		return fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, it.failures+1, err), true
	}
	return err, false
}

// retryDelay is RetryAfter's delay if the operation asked for one, else the
// jittered backoff.
func (l *loop[Obj]) retryDelay(it *item[Obj]) time.Duration {
	if d, ok := retryAfter(it.err); ok {
		return d
	}
	return l.backoff.delay(it.failures + 1)
}

// statusWrite is what became of a status write.
type statusWrite int

const (
	statusLanded     statusWrite = iota
	statusStale                  // the object changed or went: a newer revision follows
	statusKeyChanged             // SetObjectStatus returned an object with another primary key
)

// writeStatus stores st in the object with a compare-and-swap.
func (l *loop[Obj]) writeStatus(wtxn statedb.WriteTxn, it *item[Obj], st Status) statusWrite {
	obj := l.cfg.SetObjectStatus(it.target, st)
	_, _, err := l.cfg.Table.CompareAndSwap(wtxn, it.rev, obj)
	if err == nil {
		// Revisions are unique across the table, so the swap can only
		// have matched this very object: the key is unchanged.
		return statusLanded
	}
	if l.keyOf(obj) != it.key {
		return statusKeyChanged
	}
	if !errors.Is(err, statedb.ErrRevisionNotEqual) {
		return statusStale // deleted meanwhile: the delete follows
	}
	cur, rev, found := l.cfg.Table.Get(wtxn, l.primary.QueryFromObject(it.obj))
	if !found {
		return statusStale
	}
	cs := l.cfg.GetObjectStatus(cur)
	if it.status.ID == 0 || cs.ID != it.status.ID || cs.Kind != it.status.Kind {
		return statusStale // a new request: its revision will be reconciled
	}
	merged := l.cfg.SetObjectStatus(l.cfg.CloneObject(cur), st)
	if _, _, err = l.cfg.Table.CompareAndSwap(wtxn, rev, merged); err != nil {
		return statusStale
	}
	return statusLanded
}

// configFailure reports an object that could not be handled because the
// Config's functions misbehave. Nothing is written to the table; the object
// counts as failing and, unless the misbehaviour is certain to repeat
// (ErrInvalidConfig) or it is given up on, is retried.
func (l *loop[Obj]) configFailure(it *item[Obj], err error, giveUp bool, now time.Time) {
	if err == nil {
		err = fmt.Errorf("%w: Config.CloneObject failed", ErrInvalidConfig)
	}
	l.status.setFailing(it.key, err.Error(), false, now)
	if errors.Is(err, ErrInvalidConfig) {
		l.log.Error("Reconciler misconfigured; the object is not reconciled", "key", printableKey(it.key), "error", err)
		return
	}
	if !giveUp {
		l.scheduleRetry(it, it.rev, it.failures+1, false, now.Add(l.retryDelay(it)))
	}
}

// commitDelete records a delete's result. There is no status to write: the
// object is gone from the table.
func (l *loop[Obj]) commitDelete(wtxn statedb.WriteTxn, it *item[Obj], now time.Time) {
	if it.err == nil {
		l.breaker.observe(true, false, "", it.failures > 0, now, l.backoff)
		l.status.clearFailing(it.key)
		return
	}
	if _, _, found := l.cfg.Table.Get(wtxn, l.primary.QueryFromObject(it.obj)); found {
		// Inserted again: Update of the new object supersedes the delete.
		l.status.clearFailing(it.key)
		return
	}
	if isDeferral(it.err) {
		d, _ := retryAfter(it.err)
		l.scheduleRetry(it, it.rev, it.failures, true, now.Add(d))
		return
	}
	err, giveUp := l.failure(it)
	l.breaker.observe(false, giveUp, err.Error(), it.failures > 0, now, l.backoff)
	l.status.setFailing(it.key, "delete: "+err.Error(), true, now)
	if !giveUp {
		l.scheduleRetry(it, it.rev, it.failures+1, false, now.Add(l.retryDelay(it)))
	}
}

func (l *loop[Obj]) scheduleRetry(it *item[Obj], rev statedb.Revision, failures int, deferred bool, due time.Time) {
	l.retries.add(&retryEntry[Obj]{
		key:      it.key,
		obj:      it.obj,
		rev:      rev,
		origRev:  it.origRev,
		deleted:  it.deleted,
		deferred: deferred,
		failures: failures,
		due:      due,
	})
	l.metrics.RetryScheduled()
}

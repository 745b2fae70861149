package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/statedb"
)

// A commit records the results of finished tasks. It has three phases:
// plan decides, on the loop goroutine, what each result asks of the table;
// write makes the status writes in one write transaction; finish does the
// bookkeeping that depends on how the writes went and frees the keys. The
// write phase holds the table's write lock for most of a commit's time,
// so when more work is waiting it runs on the committer goroutine while
// the loop picks up and runs the next round (committer.go).

// commitAction is what planning decided for one item.
type commitAction uint8

const (
	actWrite      commitAction = iota // write the status (Done or Error)
	actDeferred                       // RetryAfter: stays Pending, retried later
	actConfigFail                     // no copy to write into: report, retry
	actSameError                      // failed as the object says already: just retry
	actDelete                         // a delete's result: nothing to write
)

// commitJob is one commit: every item whose result it records, and those
// of them with a status to write.
type commitJob[Obj any] struct {
	now     time.Time
	items   []*item[Obj]
	writes  []*item[Obj]
	prunes  []task[Obj] // finished prunes: they write nothing
	aborted bool        // stopping: nothing was written
	// realized holds the realization latencies of the objects the
	// commit marked Done (realization.go).
	realized []time.Duration
}

func (j *commitJob[Obj]) reset() {
	clear(j.items)
	clear(j.writes)
	clear(j.prunes)
	j.items, j.writes, j.prunes, j.aborted = j.items[:0], j.writes[:0], j.prunes[:0], false
	j.realized = j.realized[:0]
}

// plan takes the finished tasks and decides what each result asks for.
func (l *loop[Obj]) plan(now time.Time) *commitJob[Obj] {
	l.taken = l.results.take(l.taken)
	job := l.freeJobs[len(l.freeJobs)-1]
	l.freeJobs = l.freeJobs[:len(l.freeJobs)-1]
	job.now = now
	for i := range l.taken {
		t := &l.taken[i]
		switch t.op {
		case OpUpdate, OpDelete:
			l.planItem(job, t.one)
		case OpUpdateBatch, OpDeleteBatch:
			for _, it := range t.batch {
				l.planItem(job, it)
			}
		case OpPrune:
			job.prunes = append(job.prunes, *t)
		}
	}
	clear(l.taken)
	return job
}

// planItem decides what one object's result asks of the table.
func (l *loop[Obj]) planItem(job *commitJob[Obj], it *item[Obj]) {
	job.items = append(job.items, it)
	if it.deleted {
		it.action = actDelete
		if it.err != nil {
			// A failed delete of an object inserted again meanwhile is
			// superseded by the Update of the new object.
			_, _, it.reinserted = l.cfg.Table.Get(l.db.ReadTxn(), l.primary.QueryFromObject(it.obj))
		}
		return
	}
	err := it.err
	if isDeferral(err) {
		// Not ready yet, not a failure: the status stays Pending.
		it.action = actDeferred
		return
	}
	if err != nil {
		err, it.giveUp = l.failure(it.err, it.failures)
	}
	it.statusErr = err
	if !it.cloned {
		// There is no copy to write the status into (CloneObject
		// panicked or returned the object itself): report, do not touch
		// the table.
		it.action = actConfigFail
		return
	}
	it.newStatus = Status{Kind: StatusKindDone, UpdatedAt: job.now}
	if err != nil {
		it.newStatus = Status{Kind: StatusKindError, UpdatedAt: job.now, Error: err.Error()}
	}
	l.breaker.observe(err == nil, it.giveUp, it.newStatus.Error, it.failures > 0, job.now, l.backoff)
	if err != nil && it.status.Kind == StatusKindError && it.status.Error == it.newStatus.Error {
		// A retry failed as the last attempt did, and the object says so
		// already: skip the write (and the change it would echo back to
		// us). In a retry storm this is most of the work. If the object
		// changed meanwhile, the change iterator delivers it and that
		// drops the retry scheduled for it.
		it.action = actSameError
		return
	}
	it.action = actWrite
	job.writes = append(job.writes, it)
}

// write makes the job's status writes in one write transaction, each a
// compare-and-swap on the revision the operation saw. It may run on the
// committer goroutine: it reads the items' objects and status and sets
// their outcome, fields the loop leaves alone while the items are busy,
// and touches no other state of the loop.
func (r *reconciler[Obj]) write(ctx context.Context, job *commitJob[Obj]) {
	if len(job.writes) == 0 {
		return
	}
	wtxn := r.db.WriteTxn(r.cfg.Table)
	defer wtxn.Abort()
	for _, it := range job.writes {
		it.outcome = r.writeStatus(wtxn, it)
	}
	if ctx.Err() != nil {
		// Stopping: write nothing after Stop.
		job.aborted = true
		return
	}
	wtxn.Commit()
}

// finish does what the results ask for once the writes landed: failing
// set, retries, metrics, and a finished prune (after the objects: the
// results taken with it came in before it started, and a successful prune
// settles the failed deletes among them); then frees the keys and handles
// what changed while they were busy.
func (l *loop[Obj]) finish(job *commitJob[Obj], ts *loopTimers) {
	if job.aborted {
		return // stopping: the loop is on its way out, the keys stay busy
	}
	now := job.now
	var committedAt time.Time
	if len(job.writes) > 0 {
		// job.now is when the commit was planned, before inline
		// operations ran: realization ends now, the writes landed.
		committedAt = time.Now()
	}
	for _, it := range job.items {
		l.finishItem(it, now)
		job.noteRealized(it, committedAt)
	}
	l.reportRealized(job.realized)
	for i := range job.prunes {
		l.pruneDone(&job.prunes[i], now, ts)
	}
	if n := len(job.items); n > 0 {
		d := time.Since(l.roundStart(job.items))
		l.metrics.Round(n, d)
		l.lastRound = RoundInfo{At: now, Objects: n, Duration: d}
	}
	// The keys are free again; handle what changed while they were busy.
	for _, it := range job.items {
		l.unbusy(it)
		if it.hasNext && !l.sameRequest(it) {
			l.onChange(it.next, it.nextFloor)
		}
		l.release(it)
	}
	job.reset()
	l.freeJobs = append(l.freeJobs, job)
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
func (l *loop[Obj]) roundStart(items []*item[Obj]) time.Time {
	oldest := time.Now()
	for _, it := range items {
		if it.pickedAt.Before(oldest) {
			oldest = it.pickedAt
		}
	}
	return oldest
}

// finishItem records one object's result and schedules its retry.
func (l *loop[Obj]) finishItem(it *item[Obj], now time.Time) {
	err := it.statusErr
	switch it.action {
	case actDelete:
		l.finishDelete(it, now)
		return
	case actDeferred:
		l.retryDeferred(it, now)
		return
	case actConfigFail:
		l.configFailure(it, err, it.giveUp, now)
		return
	case actSameError:
		l.retryFailed(it, now)
		return
	}
	switch it.outcome {
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
	case it.giveUp:
		l.status.setFailing(it.key, err.Error(), false, now)
	default:
		l.status.setFailing(it.key, err.Error(), false, now)
		l.retryFailed(it, now)
	}
}

// failure wraps the error of an attempt after failures earlier ones for
// the status, and reports whether the object is given up on (Permanent, a
// misconfiguration, or MaxRetries spent).
func (r *reconciler[Obj]) failure(err error, failures int) (error, bool) {
	if IsPermanent(err) || errors.Is(err, ErrInvalidConfig) {
		return err, true
	}
	if r.cfg.MaxRetries > 0 && failures+1 >= r.cfg.MaxRetries {
		return fmt.Errorf("%w after %d attempts: %w", ErrRetriesExhausted, failures+1, err), true
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

// writeStatus stores the item's new status in its object with a
// compare-and-swap.
func (r *reconciler[Obj]) writeStatus(wtxn statedb.WriteTxn, it *item[Obj]) statusWrite {
	st := it.newStatus
	obj := r.cfg.SetObjectStatus(it.target, st)
	_, _, err := r.cfg.Table.CompareAndSwap(wtxn, it.rev, obj)
	if err == nil {
		// Revisions are unique across the table, so the swap can only
		// have matched this very object: the key is unchanged.
		return statusLanded
	}
	if r.keyOf(obj) != it.key {
		return statusKeyChanged
	}
	if !errors.Is(err, statedb.ErrRevisionNotEqual) {
		return statusStale // deleted meanwhile: the delete follows
	}
	cur, rev, found := r.cfg.Table.Get(wtxn, r.primary.QueryFromObject(it.obj))
	if !found {
		return statusStale
	}
	cs := r.cfg.GetObjectStatus(cur)
	if it.status.ID == 0 || cs.ID != it.status.ID || cs.Kind != it.status.Kind {
		return statusStale // a new request: its revision will be reconciled
	}
	merged := r.cfg.SetObjectStatus(r.cfg.CloneObject(cur), st)
	if _, _, err = r.cfg.Table.CompareAndSwap(wtxn, rev, merged); err != nil {
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
		l.retryFailed(it, now)
	}
}

// finishDelete records a delete's result. There is no status to write: the
// object is gone from the table.
func (l *loop[Obj]) finishDelete(it *item[Obj], now time.Time) {
	if it.err == nil {
		l.breaker.observe(true, false, "", it.failures > 0, now, l.backoff)
		l.status.clearFailing(it.key)
		return
	}
	if it.reinserted {
		// Inserted again: Update of the new object supersedes the delete.
		l.status.clearFailing(it.key)
		return
	}
	if isDeferral(it.err) {
		l.retryDeferred(it, now)
		return
	}
	err, giveUp := l.failure(it.err, it.failures)
	l.breaker.observe(false, giveUp, err.Error(), it.failures > 0, now, l.backoff)
	l.status.setFailing(it.key, "delete: "+err.Error(), true, now)
	if !giveUp {
		l.retryFailed(it, now)
	}
}

// retryFailed schedules the retry of a failed attempt: one failure more,
// after RetryAfter's delay or the backoff.
func (l *loop[Obj]) retryFailed(it *item[Obj], now time.Time) {
	l.scheduleRetry(it, it.rev, it.failures+1, false, now.Add(l.retryDelay(it)))
}

// retryDeferred schedules the retry an operation asked for with
// RetryAfter(d, nil): not a failure, so the count stays.
func (l *loop[Obj]) retryDeferred(it *item[Obj], now time.Time) {
	d, _ := retryAfter(it.err)
	l.scheduleRetry(it, it.rev, it.failures, true, now.Add(d))
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
		// The object's status is Error now: the retry's realization
		// still counts from the change it retries.
		requestedAt: it.realizationStart(),
	})
	l.metrics.RetryScheduled()
}

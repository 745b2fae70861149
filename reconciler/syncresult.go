package reconciler

import (
	"context"
	"fmt"
	"time"

	"github.com/cilium/statedb"
)

// finishSync records a Sync's result: metrics, the status of every object
// it covered, retries and the next drift repair.
func (s *syncLoop[Obj]) finishSync(ctx context.Context, run *syncRun[Obj], now time.Time) {
	s.running, s.isOverdue, s.dirty = nil, false, true
	if ctx.Err() != nil {
		return // stopping: nothing is written after Stop
	}
	failed, whole := s.perObject(run.err)
	result := s.classify(whole, run.failures)
	s.metrics.Operation(OpSync, result, 0, run.dur)
	if run.full {
		s.metrics.FullReconciliation(now.Sub(run.start), whole)
		s.lastFull = FullInfo{At: now, Duration: now.Sub(run.start)}
		if whole != nil {
			s.lastFull.Error = whole.Error()
		}
	}

	var writes []syncWrite[Obj]
	switch {
	case whole == nil:
		writes = s.succeeded(run, failed, now)
	case isDeferral(whole):
		// Not ready, not a failure: statuses stay, the changes wait.
		for key, e := range run.entries {
			s.requeue(key, e)
		}
		d, _ := retryAfter(whole)
		s.retryNoLaterThan(now.Add(d))
	default:
		var n int
		writes, n = s.failed(run, whole, now)
		if n > 0 {
			s.metrics.BatchEntries(OpSync, result, n)
		}
	}
	s.writeStatuses(ctx, run, writes, now)
	s.recomputeRetryFloor()
	if s.cfg.FullReconciliationInterval != Off {
		s.full.arm(s.cfg.FullReconciliationInterval)
	}
}

// succeeded handles a Sync that applied the whole set, but perhaps for the
// objects in failed: those are Error and retried, the rest Done.
func (s *syncLoop[Obj]) succeeded(run *syncRun[Obj], failed map[string]ObjectFailure[Obj], now time.Time) []syncWrite[Obj] {
	s.down, s.lastErr, s.failures = false, nil, 0
	var writes []syncWrite[Obj]
	counts := map[Result]int{}
	for key, e := range run.entries {
		if f, ok := failed[key]; ok {
			delete(failed, key)
			counts[s.classify(f.Err, e.failures)]++
			writes = s.failEntry(key, e, f.Err, now, writes, true)
			continue
		}
		s.status.clearFailing(key)
		if e.mark && !e.deleted {
			counts[ResultOK]++
			writes = s.appendWrite(writes, key, e, Status{Kind: StatusKindDone, UpdatedAt: now})
		}
	}
	// Objects the Sync failed though they had not changed (the renderer
	// rejects them now): Error as of the snapshot, and retried.
	for key, f := range failed {
		obj, rev, found := s.cfg.Table.Get(run.txn, s.primary.QueryFromObject(f.Object))
		if !found {
			continue
		}
		e := &syncEntry[Obj]{change: change[Obj]{obj: obj, rev: rev}, status: s.cfg.GetObjectStatus(obj), mark: true, origRev: rev}
		counts[s.classify(f.Err, 0)]++
		writes = s.failEntry(key, e, f.Err, now, writes, true)
	}
	for res, n := range counts {
		s.metrics.BatchEntries(OpSync, res, n)
	}
	return writes
}

// failed handles a Sync that failed as a whole: every object it covered
// that asked for work is Error, and the Sync is retried with backoff
// unless every change it failed is given up on (Permanent, or its own
// MaxRetries spent).
// It returns the writes and how many objects it failed.
func (s *syncLoop[Obj]) failed(run *syncRun[Obj], whole error, now time.Time) ([]syncWrite[Obj], int) {
	s.down, s.failures = true, s.failures+1
	err, giveUp := s.giveUp(whole, s.failures)
	s.lastErr = err
	var writes []syncWrite[Obj]
	n := 0
	for key, e := range run.entries {
		if e.mark || e.deleted {
			n++
			writes = s.failEntry(key, e, whole, now, writes, false)
		} else {
			s.requeue(key, e) // unchanged, but still a change since the last success
		}
	}
	// The Sync is retried while any change it failed is not given up on
	// by its own count: the Sync's count of failures in a row says how
	// long to wait, not which objects are done trying (one inserted just
	// before the last Sync has failed once).
	if !giveUp || s.anyRetryable() {
		s.retryNoLaterThan(now.Add(s.delay(whole, s.failures)))
	}
	s.failLog.write(&s.loggedErr, &s.loggedAt, "", OpSync, err.Error(), s.failures, now)
	return writes, n
}

// failEntry records that a Sync failed one object: its status (unless it
// says so already), the failing set, and its place in the next Sync. With
// retry set, the object's own backoff (or RetryAfter) schedules that Sync.
func (s *syncLoop[Obj]) failEntry(key string, e *syncEntry[Obj], err error, now time.Time, writes []syncWrite[Obj], retry bool) []syncWrite[Obj] {
	if isDeferral(err) {
		s.requeue(key, e)
		d, _ := retryAfter(err)
		s.retryNoLaterThan(now.Add(d))
		return writes
	}
	e.tried = true
	e.failures++
	err, giveUp := s.giveUp(err, e.failures)
	msg := err.Error()
	if e.deleted {
		s.status.setFailing(key, "delete: "+msg, true, now)
	} else {
		s.status.setFailing(key, msg, false, now)
		if e.status.Kind != StatusKindError || e.status.Error != msg {
			writes = s.appendWrite(writes, key, e, Status{Kind: StatusKindError, UpdatedAt: now, Error: msg})
		}
	}
	e.held = giveUp
	s.requeue(key, e)
	if retry && !giveUp {
		s.retryNoLaterThan(now.Add(s.delay(err, e.failures)))
	}
	return writes
}

// giveUp wraps a failure for its status and reports whether it is given up
// on: Permanent, a misconfiguration, or MaxRetries spent after failures.
func (s *syncLoop[Obj]) giveUp(err error, failures int) (error, bool) {
	return s.failure(err, failures-1)
}

// delay is RetryAfter's delay if err asks for one, else the backoff after
// failures.
func (s *syncLoop[Obj]) delay(err error, failures int) time.Duration {
	if d, ok := retryAfter(err); ok {
		return d
	}
	return s.backoff.delay(failures)
}

// requeue puts a covered change back into pending for the next Sync,
// unless a newer change of the key came meanwhile: that one supersedes it.
func (s *syncLoop[Obj]) requeue(key string, e *syncEntry[Obj]) {
	if _, newer := s.pending[key]; newer {
		return
	}
	if e.isUntried() {
		s.untried++
	}
	if !e.tried && (!s.hasFloor || e.floor < s.firstFloor) {
		// The lowest floor of the untried changes, whatever order they
		// come back in: a deferred Sync's changes go back among newer
		// ones read while it ran.
		s.firstFloor, s.hasFloor = e.floor, true
	}
	s.pending[key] = e
}

// anyRetryable reports whether a failed change waits for a retry, not
// given up on.
func (s *syncLoop[Obj]) anyRetryable() bool {
	for _, e := range s.pending {
		if e.tried && !e.held {
			return true
		}
	}
	return false
}

func (s *syncLoop[Obj]) retryNoLaterThan(t time.Time) {
	if s.retryAt.IsZero() || t.Before(s.retryAt) {
		s.retryAt = t
	}
}

// recomputeRetryFloor finds the lowest origRev of the failed changes that
// wait for a retry, once per Sync.
func (s *syncLoop[Obj]) recomputeRetryFloor() {
	s.retryFloor = ^statedb.Revision(0)
	for _, e := range s.pending {
		if e.tried && !e.held {
			s.retryFloor = min(s.retryFloor, e.origRev)
		}
	}
}

// syncWrite is one status write of a Sync's result, and when the change
// it realizes was written.
type syncWrite[Obj any] struct {
	statusWrite[Obj]
	requestedAt time.Time
}

// appendWrite adds the write of st into a copy of e's object.
func (s *syncLoop[Obj]) appendWrite(writes []syncWrite[Obj], key string, e *syncEntry[Obj], st Status) []syncWrite[Obj] {
	target, err := s.clone(e.obj)
	if err != nil {
		s.status.setFailing(key, err.Error(), false, st.UpdatedAt)
		s.log.Error("Reconciler misconfigured; the object's status is not written", "key", printableKey(key), "error", err)
		return writes
	}
	return append(writes, syncWrite[Obj]{
		statusWrite: statusWrite[Obj]{key: key, obj: e.obj, rev: e.rev, target: target, hasTarget: true, expect: e.status, status: st},
		requestedAt: e.requestedAt,
	})
}

// writeStatuses makes the writes in transactions of at most RoundSize
// objects, each under the rule of writeStatus: an object whose status for
// this reconciler changed meanwhile keeps it, and the next Sync covers
// it. The realization of the objects marked Done ends when their
// transaction is committed.
func (s *syncLoop[Obj]) writeStatuses(ctx context.Context, run *syncRun[Obj], writes []syncWrite[Obj], now time.Time) {
	var realized []time.Duration
	for rest := writes; len(rest) > 0; rest = rest[min(len(rest), s.cfg.RoundSize):] {
		chunk := rest[:min(len(rest), s.cfg.RoundSize)]
		wtxn := s.db.WriteTxn(s.cfg.Table)
		for i := range chunk {
			chunk[i].outcome = s.writeStatus(wtxn, &chunk[i].statusWrite)
		}
		if ctx.Err() != nil {
			wtxn.Abort()
			return // stopping: nothing is written after Stop
		}
		wtxn.Commit()
		committedAt := time.Now()
		realized = realized[:0]
		for _, w := range chunk {
			switch {
			case w.outcome == writeKeyChanged:
				err := fmt.Errorf("%w: Config.SetObjectStatus changed the object's primary key", ErrInvalidConfig)
				s.status.setFailing(w.key, err.Error(), false, now)
				s.log.Error("Reconciler misconfigured; the object is not reconciled", "key", printableKey(w.key), "error", err)
			case w.outcome == writeLanded && w.status.Kind == StatusKindDone && !w.requestedAt.IsZero() && !committedAt.Before(w.requestedAt):
				realized = append(realized, committedAt.Sub(w.requestedAt))
			}
		}
		s.reportRealized(realized)
	}
	if n := len(run.entries); n > 0 {
		d := time.Since(run.start)
		s.metrics.Round(n, d)
		s.lastRound = RoundInfo{At: now, Objects: n, Duration: d}
	}
}

// report publishes health, gauges, the snapshot and progress. It costs
// O(1): the counts are kept as changes come and Syncs end.
func (s *syncLoop[Obj]) report(now time.Time) {
	objects := s.cfg.Table.NumObjects(s.db.ReadTxn())
	whole := wholeError{op: "sync", err: s.lastErr}
	if s.isOverdue {
		whole.err = fmt.Errorf("%w: still running after %s", ErrTimeout, s.cfg.OperationTimeout)
	}
	s.status.report(s.health, now, objects, s.suspended(), whole, &s.healthTimer)

	waiting, inFlight, pending := len(s.pending), 0, s.untried
	reconciled, retryFloor := s.pulledTo, s.retryFloor
	if s.hasFloor {
		reconciled = min(reconciled, s.firstFloor)
	}
	if r := s.running; r != nil {
		waiting += len(r.entries)
		inFlight = 1
		pending += r.untried
		reconciled = min(reconciled, r.minFloor)
		retryFloor = min(retryFloor, r.retryFloor)
	}
	retries := 0
	if !s.retryAt.IsZero() {
		retries = 1
	}

	snap := s.baseSnapshot(now, &s.status, s.initialized)
	snap.Retries, snap.NextRetry = retries, s.retryAt
	snap.Waiting, snap.InFlight = waiting, inFlight
	snap.LastRound, snap.LastFull = s.lastRound, s.lastFull
	errs := len(s.status.failing) - s.status.failingDeletes
	snap.Objects = ObjectCounts{Pending: pending, Error: errs, Done: max(0, objects-pending-errs)}
	s.snapshot.Store(snap)
	s.progress.set(progressValues{reconciled: reconciled, retryLow: min(retryFloor, reconciled+1), outstanding: waiting})
	// After the progress, as in the per-object loop (report.go).
	s.metrics.Gauges(Gauges{Failing: len(s.status.failing), Waiting: waiting, InFlight: inFlight, Retries: retries})
	s.dirty = false
}

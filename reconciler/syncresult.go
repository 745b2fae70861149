package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Recording a Sync's result: the status of every request it covered,
// under the one write rule (writeStatus), and where each request goes
// next: settled, retried or held, as in the per-object loop's commit.

// finishSync takes a Sync's result when its goroutine hands it back.
func (s *syncLoop[Obj]) finishSync(ctx context.Context, run *syncRun[Obj], now time.Time) {
	s.running, s.isOverdue, s.dirty = nil, false, true
	if !run.settled { // else it counted as failed at its deadline: the late result is discarded
		s.settleRun(ctx, run, run.err, run.dur, now)
	}
	clear(run.taken)
	s.taken = run.taken[:0]
}

// syncOverdue records that the running Sync passed OperationTimeout: it
// fails with ErrTimeout now, though it keeps its place (no second Sync
// may run beside it) until it returns.
func (s *syncLoop[Obj]) syncOverdue(ctx context.Context, run *syncRun[Obj], now time.Time) {
	if run != s.running || run.settled {
		return // its result came first, with ErrTimeout
	}
	s.isOverdue, s.dirty, run.settled = true, true, true
	s.settleRun(ctx, run, timeoutError(OpSync, s.cfg.OperationTimeout), s.cfg.OperationTimeout, now)
}

// settleRun records the outcome err of Sync run.
func (s *syncLoop[Obj]) settleRun(ctx context.Context, run *syncRun[Obj], err error, dur time.Duration, now time.Time) {
	if ctx.Err() != nil {
		return // stopping: nothing is written after Stop
	}
	mine := run.taken[:0:0]
	for _, r := range run.taken {
		if s.work.syncResult(r, run.id) {
			mine = append(mine, r)
		}
	}
	if !s.leading() {
		// Another replica leads now: nothing here is written, and the
		// requests wait, known, for this replica's next term.
		for _, r := range mine {
			s.work.untake(r)
		}
		s.standby()
		return
	}
	failed, whole := s.perObject(err)
	s.metrics.Operation(OpSync, s.classify(whole, run.failures), 0, dur)
	if run.full {
		s.metrics.FullReconciliation(now.Sub(run.start), whole)
		s.lastFull = FullInfo{At: now, Duration: now.Sub(run.start)}
		if whole != nil {
			s.lastFull.Error = whole.Error()
		}
	}
	s.wholeOutcome(whole, now)
	counts := map[Result]int{}
	for rest := mine; len(rest) > 0; rest = rest[min(len(rest), s.cfg.RoundSize):] {
		chunk := rest[:min(len(rest), s.cfg.RoundSize)]
		if !s.commitChunk(ctx, chunk, failed, whole, counts, now) {
			return
		}
	}
	// Objects the Sync failed though they asked for nothing (the renderer
	// rejects them now): Error as of the snapshot, and retried.
	extra := s.unchangedFailures(run, failed, now)
	if len(extra) > 0 && !s.commitChunk(ctx, extra, failed, nil, counts, now) {
		return
	}
	for res, n := range counts {
		s.metrics.BatchEntries(OpSync, res, n)
	}
	if n := len(mine); n > 0 {
		d := time.Since(run.start)
		s.metrics.Round(n, d)
		s.lastRound = RoundInfo{At: now, Objects: n, Duration: d}
	}
	if s.cfg.FullReconciliationInterval != Off {
		s.full.arm(s.cfg.FullReconciliationInterval)
	}
}

// wholeOutcome records what the Sync as a whole came to: the backoff of
// the Syncs failing in a row, health's error and the log.
func (s *syncLoop[Obj]) wholeOutcome(whole error, now time.Time) {
	switch {
	case whole == nil:
		s.down, s.lastErr, s.failures, s.synced = false, nil, 0, true
	case isDeferral(whole):
		// Not ready, not a failure: statuses stay, the requests wait.
	default:
		s.down, s.failures = true, s.failures+1
		s.lastErr, _ = s.failure(whole, s.failures-1)
		s.failLog.write(&s.loggedErr, &s.loggedAt, "", OpSync, s.lastErr.Error(), s.failures, now)
	}
}

// unchangedFailures makes requests of the objects in failed that no
// request of the Sync covered and that nothing newer asks for.
func (s *syncLoop[Obj]) unchangedFailures(run *syncRun[Obj], failed map[string]ObjectFailure[Obj], now time.Time) []*request[Obj] {
	var out []*request[Obj]
	for key, f := range failed {
		if s.work.byKey[key] != nil {
			continue // ours were judged; a newer request covers it
		}
		obj, rev, found := s.cfg.Table.Get(run.txn, s.queryOf(f.Object))
		if !found || s.cfg.GetObjectStatus(obj).Kind == StatusKindUnset {
			continue // gone, or asks nothing: no status is written into it
		}
		r := s.work.add(key, change[Obj]{obj: obj, rev: rev}, Status{Kind: StatusKindPending}, rev, now)
		s.work.setExpect(r, s.cfg.GetObjectStatus(obj))
		out = append(out, r)
	}
	return out
}

// syncVerdict is what the Sync's result asks of one request.
type syncVerdict[Obj any] struct {
	r      *request[Obj]
	err    error // the failure as the status reports it; nil: applied
	giveUp bool
	write  int // index of its write, or -1
}

// commitChunk judges the requests of chunk, writes their statuses in one
// transaction and settles them. It reports false when stopping.
func (s *syncLoop[Obj]) commitChunk(ctx context.Context, chunk []*request[Obj], failed map[string]ObjectFailure[Obj], whole error, counts map[Result]int, now time.Time) bool {
	verdicts := make([]syncVerdict[Obj], 0, len(chunk))
	var writes []statusWrite[Obj]
	for _, r := range chunk {
		err := whole
		if f, ok := failed[r.key]; ok {
			delete(failed, r.key) // judged here: not an unchanged object's failure
			err = f.Err
		}
		counts[s.classify(err, r.attempts)]++
		v, w := s.judge(r, err, now)
		if v.write = -1; w.key != "" {
			v.write = len(writes)
			writes = append(writes, w)
		}
		verdicts = append(verdicts, v)
	}
	wr, ok := s.writeAll(ctx, writes, &s.ownWrites)
	if !ok {
		return false // stopping: nothing is written after Stop
	}
	committedAt := wr.at
	var realized []time.Duration
	for i := range verdicts {
		var w *statusWrite[Obj]
		if j := verdicts[i].write; j >= 0 {
			w = &writes[j]
		}
		if d, ok := s.settle(&verdicts[i], w, whole != nil, committedAt, now); ok {
			realized = append(realized, d)
		}
	}
	s.reportRealized(realized)
	return true
}

// judge decides what err, the Sync's outcome for r, asks of the table.
func (s *syncLoop[Obj]) judge(r *request[Obj], err error, now time.Time) (syncVerdict[Obj], statusWrite[Obj]) {
	s.work.setTried(r) // its result is in: the change has been attempted
	v := syncVerdict[Obj]{r: r, err: err}
	if err != nil && !isDeferral(err) {
		v.err, v.giveUp = s.failure(err, r.attempts)
	}
	if r.deleted || isDeferral(err) {
		return v, statusWrite[Obj]{}
	}
	st := Status{Kind: StatusKindDone, UpdatedAt: now}
	if v.err != nil {
		st = Status{Kind: StatusKindError, UpdatedAt: now, Error: v.err.Error()}
		if r.expect.Kind == StatusKindError && r.expect.Error == st.Error {
			return v, statusWrite[Obj]{} // says so already
		}
	}
	target, cerr := s.clone(r.obj)
	if cerr != nil {
		v.err, v.giveUp = cerr, true
		return v, statusWrite[Obj]{}
	}
	return v, statusWrite[Obj]{key: r.key, obj: r.obj, rev: r.rev, target: target, hasTarget: true, expect: r.expect, status: st}
}

// settle moves a request on after its write. It returns the realization
// latency of a change it marked Done.
func (s *syncLoop[Obj]) settle(v *syncVerdict[Obj], w *statusWrite[Obj], wholeFailed bool, committedAt, now time.Time) (time.Duration, bool) {
	r := v.r
	if !s.work.afterWrite(r, w, &v.err, &v.giveUp, now) {
		return 0, false
	}
	if isDeferral(v.err) {
		d, _ := retryAfter(v.err)
		s.work.retry(r, now.Add(d), true, "", now)
		return 0, false
	}
	if v.err == nil {
		start := r.requestedAt
		s.work.settle(r)
		if w == nil || start.IsZero() || committedAt.Before(start) {
			return 0, false
		}
		return committedAt.Sub(start), true
	}
	s.failed(r, v.err, v.giveUp, wholeFailed, now)
	return 0, false
}

// failed records that the Sync failed r: given up on (held), or retried
// by the next Sync after the backoff: the Syncs' own when the Sync failed
// as a whole (the target is down), the object's when it failed alone.
func (s *syncLoop[Obj]) failed(r *request[Obj], err error, giveUp, wholeFailed bool, now time.Time) {
	msg := err.Error()
	if r.deleted {
		msg = "delete: " + msg
	}
	s.status.recent.add(recentError{key: r.key, err: msg, at: now})
	if !wholeFailed {
		s.failLog.write(&r.loggedErr, &r.loggedAt, r.key, OpSync, msg, r.attempts+1, now)
	}
	r.attempts++
	if giveUp {
		s.work.hold(r, msg, errors.Is(err, ErrInvalidConfig), now)
		r.exhausted = errors.Is(err, ErrRetriesExhausted)
		if errors.Is(err, ErrInvalidConfig) {
			s.log.Error("Reconciler misconfigured; the object is not reconciled", "key", printableKey(r.key), "error", err)
		}
		return
	}
	failures := r.attempts
	if wholeFailed {
		failures = s.failures
	}
	delay := s.backoff.delay(failures)
	d, asked := retryAfter(err)
	if asked {
		delay = d
	}
	s.work.retry(r, now.Add(delay), false, msg, now)
	r.retryAfter = asked
}

// report publishes what the outstanding work says (report.go). A replica
// that does not lead keeps its requests for a takeover, but reports them
// as another replica's.
func (s *syncLoop[Obj]) report(now time.Time) {
	defer s.reportSig.reported()
	whole := wholeError{op: "sync", err: s.lastErr}
	if s.isOverdue {
		whole.err = fmt.Errorf("%w: still running after %s", ErrTimeout, s.cfg.OperationTimeout)
	}
	inFlight := 0
	if s.running != nil {
		inFlight = 1
	}
	s.publish(s.work, &s.status, s.health, now, reportParts{
		readTo:      s.readTo,
		initialized: s.initialized,
		inFlight:    inFlight,
		standby:     !s.leading(),
		ownChanged:  s.ownChanged,
		whole:       whole,
		lastRound:   s.lastRound,
		lastFull:    s.lastFull,
		healthTimer: &s.healthTimer,
	})
	s.dirty = false
}

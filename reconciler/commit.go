package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A commit records finished results in three steps. judge, on the loop,
// decides what each wanted result asks of the table. writeAll makes the
// status writes in one write transaction: on the loop, or, while more work
// waits, on the committer goroutine (committer.go), so that the loop reads
// and dispatches the next round while they are written. landed, on the
// loop again, moves each request on according to how its write went.

// verdict is what one result asks for. It holds values only: it waits,
// with its write, while the write is out on the committer.
type verdict[Obj any] struct {
	r       *request[Obj]
	op      Op
	attempt uint64 // the attempt judged
	opErr   error  // what the operation returned (ErrTimeout when overdue)
	cloned  bool   // the operation was given its clone
	err     error  // the failure as the status reports it; nil on success
	giveUp  bool   // Permanent, misconfigured, or MaxRetries spent
	write   int    // index of its write in the commit's writes, or -1
}

// commitJob is one commit: the verdicts that wait for their writes, the
// writes, and when it was judged. Only the writes go to the committer.
type commitJob[Obj any] struct {
	verdicts []verdict[Obj]
	writes   []statusWrite[Obj]
	judged   int       // results judged, written or not (a round's size)
	oldest   time.Time // when the longest-waiting of them was queued
	at       time.Time // when they were judged
}

// commit lands the commits the committer has handed back, then takes the
// finished results when it is time and commits them. It reports whether
// it did either.
func (l *loop[Obj]) commit(ctx context.Context, now time.Time, ts *loopTimers) bool {
	did := false
	for _, b := range l.committer.returned() {
		if b.ok { // else aborted at Stop: nothing moves on after Stop
			l.landed(b.job, b.wr, now)
		}
		l.committer.release(b.job)
		did = true
	}
	job := l.committer.free()
	if job == nil {
		return did // every job is out: the results wait their turn
	}
	ok, wait := l.exec.shouldCommit(now, l.cfg.RoundSize)
	if !ok {
		if wait > 0 {
			ts.commit.armAt(now.Add(wait))
		}
		l.committer.release(job)
		return did
	}
	ts.commit.disarm()
	l.judgeAll(job, now, ts)
	switch {
	case ctx.Err() != nil:
		// Stopping: nothing is written after Stop.
	case len(job.writes) > 0 && (l.committer.busy() || l.pipelined(now)):
		// Behind the commits out, in order; or while the loop reads on.
		l.committer.send(ctx, l.reconciler, job)
		return true
	default:
		if wr, ok := l.writeAll(ctx, job.writes, &l.ownWrites); ok {
			l.landed(job, wr, now)
		}
	}
	l.committer.release(job)
	return true
}

// judgeAll takes the finished results and judges them into job: a result
// with nothing to write moves its request on at once, the others wait in
// stCommitting for their writes.
func (l *loop[Obj]) judgeAll(job *commitJob[Obj], now time.Time, ts *loopTimers) {
	l.results = l.exec.take(l.results)
	job.at, job.oldest = now, now
	for i := range l.results {
		res := &l.results[i]
		if res.op == OpPrune {
			l.pruneDone(res, now, ts)
			continue
		}
		v, w, ok := l.judge(res, now)
		if !ok {
			continue
		}
		job.judged++
		job.oldest = earlier(job.oldest, v.r.pickedAt)
		if w.key == "" {
			v.write = -1 // nothing to write: moved on at once
			l.settleVerdict(&v, nil, now, time.Time{})
			continue
		}
		v.write = len(job.writes)
		job.writes = append(job.writes, w)
		job.verdicts = append(job.verdicts, v)
		l.work.writeOut(v.r, v.attempt)
		v.r.enteredAt = now
	}
	clear(l.results)
}

// pipelined reports whether a commit's writes go to the committer: a
// backlog waits (the last round stopped for lack of room, or retries are
// due), and the loop reads and dispatches it while they are written.
// Otherwise the loop writes them itself, and a lone change takes no extra
// goroutine hop. (The changes' watch channel tells nothing here: the
// iterator hands out a closed one after every read.)
func (l *loop[Obj]) pipelined(now time.Time) bool {
	return l.moreChanges || l.retryDue(now) || forcePipelined.Load()
}

// landed moves on the requests of a commit whose writes wr are in the
// table.
func (l *loop[Obj]) landed(job *commitJob[Obj], wr written, now time.Time) {
	realized := l.realized[:0]
	for i := range job.verdicts {
		v := &job.verdicts[i]
		if !l.work.writeBack(v.r, v.attempt) {
			continue // replaced or settled while its write was out
		}
		if d, ok := l.settleVerdict(v, &job.writes[v.write], now, wr.at); ok {
			realized = append(realized, d)
		}
	}
	l.reportRealized(realized)
	l.realized = realized[:0]
	if len(l.full.repair) > 0 {
		l.repairTouched(now)
	}
	if n := job.judged; n > 0 {
		d := time.Since(job.oldest)
		l.metrics.Round(n, d)
		l.lastRound = RoundInfo{At: job.at, Objects: n, Duration: d}
	}
}

// reset empties the job for the next commit, keeping its buffers.
func (job *commitJob[Obj]) reset() {
	clear(job.verdicts)
	clear(job.writes)
	*job = commitJob[Obj]{verdicts: job.verdicts[:0], writes: job.writes[:0]}
}

// judge decides what a result asks for. It reports false for a result
// nobody waits for any more: its request was replaced, or it already
// counted as failed when it ran past its timeout.
func (l *loop[Obj]) judge(res *result[Obj], now time.Time) (v verdict[Obj], w statusWrite[Obj], ok bool) {
	r := l.work.byKey[res.key]
	if r == nil {
		return v, w, false
	}
	if res.overdue {
		if !l.work.overdue(r, res.attempt) {
			return v, w, false
		}
		res.err = timeoutError(res.op, l.cfg.OperationTimeout)
		l.metrics.Operation(res.op, ResultTimeout, 1, l.cfg.OperationTimeout)
	} else if !l.work.returned(r, res.attempt) {
		return v, w, false
	}
	switch {
	case res.notOwned && l.ownsKey(r.key):
		l.work.requeue(r, now) // owned again since the worker looked: start anew
		return v, w, false
	case res.notOwned || !l.ownsKey(r.key):
		// No status is written for a key another replica owns.
		l.work.lose(r.key, r.deleted, r.askedAt)
		return v, w, false
	}
	v = verdict[Obj]{r: r, op: res.op, attempt: res.attempt, opErr: res.err, cloned: res.cloned}
	if res.err != nil && !isDeferral(res.err) {
		v.err, v.giveUp = l.failure(res.err, r.attempts)
	}
	if r.deleted || isDeferral(res.err) || (!res.cloned && !res.overdue) {
		return v, w, true // nothing to write (or nothing to write it into)
	}
	st := Status{Kind: StatusKindDone, UpdatedAt: now}
	if v.err != nil {
		st = Status{Kind: StatusKindError, UpdatedAt: now, Error: v.err.Error()}
		if r.expect.Kind == StatusKindError && r.expect.Error == st.Error {
			// Failed as the object says already: skip the write (and
			// the change it would echo back). In a retry storm this is
			// most of the work.
			return v, w, true
		}
	}
	w = statusWrite[Obj]{key: r.key, obj: r.obj, rev: res.rev, target: res.target, hasTarget: res.cloned,
		expect: r.expect, status: st, fenced: l.cfg.Ownership != nil}
	if !res.cloned {
		// Overdue, the operation still holds its clone: write into a
		// copy of the object as last read.
		w.rev = r.rev
	}
	return v, w, true
}

// settleVerdict moves a request on once its write (w, nil when it had
// none) went as it went. It returns the realization latency of a change it
// marked Done.
func (l *loop[Obj]) settleVerdict(v *verdict[Obj], w *statusWrite[Obj], now, committedAt time.Time) (time.Duration, bool) {
	r := v.r
	l.work.setTried(r) // its result is in, and written: the change has been attempted
	if !l.work.afterWrite(r, w, &v.err, &v.giveUp, now) {
		return 0, false
	}
	if isDeferral(v.opErr) {
		d, _ := retryAfter(v.opErr)
		l.work.retry(r, now.Add(d), true, "", now)
		return 0, false
	}
	if v.err == nil && (r.deleted || v.cloned) {
		l.breaker.observe(true, false, "", r.attempts > 0, now, l.backoff)
		start := r.requestedAt
		l.work.settle(r)
		if w == nil || start.IsZero() || committedAt.IsZero() || committedAt.Before(start) {
			return 0, false
		}
		return committedAt.Sub(start), true
	}
	if v.err == nil {
		v.err = fmt.Errorf("%w: Config.CloneObject failed", ErrInvalidConfig)
		v.giveUp = true
	}
	l.failed(v, now)
	return 0, false
}

// failed records a failed attempt: the request is given up on (held) or
// scheduled for a retry after RetryAfter's delay or the backoff.
func (l *loop[Obj]) failed(v *verdict[Obj], now time.Time) {
	r, err := v.r, v.err
	msg := err.Error()
	if r.deleted {
		msg = "delete: " + msg
	}
	l.breaker.observe(false, v.giveUp, msg, r.attempts > 0, now, l.backoff)
	l.status.recent.add(recentError{key: r.key, err: msg, at: now})
	l.failLog.write(&r.loggedErr, &r.loggedAt, r.key, v.op, msg, r.attempts+1, now)
	r.attempts++
	if v.giveUp {
		l.work.hold(r, msg, errors.Is(err, ErrInvalidConfig), now)
		r.exhausted = errors.Is(err, ErrRetriesExhausted)
		if errors.Is(err, ErrInvalidConfig) {
			l.log.Error("Reconciler misconfigured; the object is not reconciled", "key", printableKey(r.key), "error", err)
		}
		return
	}
	delay := l.backoff.delay(r.attempts)
	d, asked := retryAfter(v.opErr)
	if asked {
		delay = d
	}
	l.work.retry(r, now.Add(delay), false, msg, now)
	r.retryAfter = asked
	l.metrics.RetryScheduled()
}

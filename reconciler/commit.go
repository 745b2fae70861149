package reconciler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cilium/statedb"
)

// A commit records finished results in three steps, all on the loop
// goroutine: judge decides what each wanted result asks of the table,
// writeAll makes the status writes in one write transaction, and settle
// moves each request on according to how its write went.

// verdict is what one result asks for.
type verdict[Obj any] struct {
	r      *request[Obj]
	res    *result[Obj]
	err    error // the failure as the status reports it; nil on success
	giveUp bool  // Permanent, misconfigured, or MaxRetries spent
	write  int   // index of its write in the commit's writes, or -1
}

// statusWrite is one status write into the table.
type statusWrite[Obj any] struct {
	key    string
	obj    Obj              // the object the operation saw (its primary key finds the current one)
	rev    statedb.Revision // its revision
	target Obj              // the operation's clone: written when the object is unchanged
	// hasTarget is false when the operation never got its clone (it is
	// still running past its timeout): obj, at rev, is cloned instead.
	hasTarget bool
	expect    Status // this reconciler's status the write requires in the table
	status    Status // the status to write
	outcome   writeOutcome
}

// writeOutcome is what became of a status write.
type writeOutcome uint8

const (
	writeLanded     writeOutcome = iota
	writeSuperseded              // our status changed, or the object went: a newer request follows
	writeKeyChanged              // SetObjectStatus returned an object with another primary key
)

// commit takes the finished results when it is time and records them. It
// reports whether it took any.
func (l *loop[Obj]) commit(ctx context.Context, now time.Time, ts *loopTimers) bool {
	ok, wait := l.exec.shouldCommit(now, l.cfg.RoundSize)
	if !ok {
		if wait > 0 {
			ts.commit.arm(wait)
		}
		return false
	}
	ts.commit.disarm()
	l.results = l.exec.take(l.results)
	verdicts, writes := l.verdicts[:0], l.writes[:0]
	defer func() {
		clear(l.results)
		clear(verdicts)
		clear(writes)
		l.verdicts, l.writes = verdicts[:0], writes[:0]
	}()
	oldest := now
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
		oldest = earlier(oldest, v.r.pickedAt)
		if v.write = -1; w.key != "" {
			v.write = len(writes)
			writes = append(writes, w)
		}
		verdicts = append(verdicts, v)
	}
	if ctx.Err() != nil {
		return true // stopping: nothing is written after Stop
	}
	committedAt, ok := l.writeAll(ctx, writes, &l.ownWrites)
	if !ok {
		return true // stopping: nothing is written after Stop
	}
	realized := l.realized[:0]
	for i := range verdicts {
		var w *statusWrite[Obj]
		if j := verdicts[i].write; j >= 0 {
			w = &writes[j]
		}
		if d, ok := l.settleVerdict(&verdicts[i], w, now, committedAt); ok {
			realized = append(realized, d)
		}
	}
	l.reportRealized(realized)
	l.realized = realized[:0]
	if len(l.full.repair) > 0 {
		l.repairTouched(now)
	}
	if n := len(verdicts); n > 0 {
		d := time.Since(oldest)
		l.metrics.Round(n, d)
		l.lastRound = RoundInfo{At: now, Objects: n, Duration: d}
	}
	return true
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
		l.disown(r) // no status is written for a key another replica owns
		return v, w, false
	}
	r.tried = true // its result is in: the change has been attempted
	v = verdict[Obj]{r: r, res: res}
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
		expect: r.expect, status: st}
	if !res.cloned {
		// Overdue, the operation still holds its clone: write into a
		// copy of the object as last read.
		w.rev = r.rev
	}
	return v, w, true
}

// writeAll makes the writes in one write transaction, recording its
// revisions in own, and returns when it was committed (zero when there
// was nothing to write). When ctx has ended it aborts and reports false:
// nothing is written after Stop. Both loops commit through it.
func (r *reconciler[Obj]) writeAll(ctx context.Context, writes []statusWrite[Obj], own *revRanges) (time.Time, bool) {
	if len(writes) == 0 {
		return time.Time{}, true
	}
	wtxn := r.db.WriteTxn(r.cfg.Table)
	from := r.cfg.Table.Revision(wtxn) + 1
	for i := range writes {
		writes[i].outcome = r.writeStatus(wtxn, &writes[i])
	}
	if ctx.Err() != nil {
		wtxn.Abort()
		return time.Time{}, false
	}
	own.add(from, r.cfg.Table.Revision(wtxn.Commit()))
	return time.Now(), true
}

// afterWrite applies what became of r's status write w to the verdict
// (err, giveUp): a superseded write settles r, since a newer request
// follows (it reports false then); a changed key makes the verdict a
// misconfiguration; a landed Error is what the table now holds. Both
// loops settle through it.
func (wk *work[Obj]) afterWrite(r *request[Obj], w *statusWrite[Obj], err *error, giveUp *bool) bool {
	switch {
	case w != nil && w.outcome == writeSuperseded:
		wk.settle(r)
		return false
	case w != nil && w.outcome == writeKeyChanged:
		*err, *giveUp = fmt.Errorf("%w: Config.SetObjectStatus changed the object's primary key", ErrInvalidConfig), true
	case w != nil && *err != nil:
		wk.setExpect(r, w.status)
	}
	return true
}

// revRanges remembers the revisions of the last few commits of status
// writes. Each object written in a write transaction gets a revision of
// its own, in one run no other writer interleaves with: a change read at
// one of them is the loop's own write, read back.
type revRanges struct {
	from, to [4]statedb.Revision
	next     int
}

func (rr *revRanges) add(from, to statedb.Revision) {
	if to < from {
		return // nothing was written
	}
	rr.from[rr.next], rr.to[rr.next] = from, to
	rr.next = (rr.next + 1) % len(rr.from)
}

func (rr *revRanges) has(rev statedb.Revision) bool {
	for i := range rr.from {
		if rev >= rr.from[i] && rev <= rr.to[i] && rr.to[i] != 0 {
			return true
		}
	}
	return false
}

// writeStatus stores w's status if, and only if, this reconciler's status
// in the current object is still the one the request expects, whatever
// else changed (the data, another reconciler's status in a StatusSet).
// Otherwise a newer request exists, and the change iterator delivers it.
// When the object is exactly the one the operation saw, the operation's
// clone is written, keeping what Update set on it.
func (r *reconciler[Obj]) writeStatus(wtxn statedb.WriteTxn, w *statusWrite[Obj]) writeOutcome {
	target, err := w.target, error(nil)
	if !w.hasTarget {
		target, err = r.clone(w.obj)
	}
	if err == nil {
		obj := r.cfg.SetObjectStatus(target, w.status)
		if r.keyOf(obj) != w.key {
			return writeKeyChanged
		}
		if _, _, err := r.cfg.Table.CompareAndSwap(wtxn, w.rev, obj); err == nil {
			// Revisions are unique across the table: only this very
			// object, whose status the request was read from, matched.
			return writeLanded
		} else if !errors.Is(err, statedb.ErrRevisionNotEqual) {
			return writeSuperseded // deleted meanwhile: the delete follows
		}
	}
	cur, rev, found := r.cfg.Table.Get(wtxn, r.primary.QueryFromObject(w.obj))
	if !found || !sameStatus(r.cfg.GetObjectStatus(cur), w.expect) {
		return writeSuperseded
	}
	clone, err := r.clone(cur)
	if err != nil {
		return writeSuperseded // reported when the operation's own clone fails
	}
	merged := r.cfg.SetObjectStatus(clone, w.status)
	if r.keyOf(merged) != w.key {
		return writeKeyChanged
	}
	if _, _, err := r.cfg.Table.CompareAndSwap(wtxn, rev, merged); err != nil {
		return writeSuperseded
	}
	return writeLanded
}

// settleVerdict moves a request on after its commit. It returns the
// realization latency of a change it marked Done.
func (l *loop[Obj]) settleVerdict(v *verdict[Obj], w *statusWrite[Obj], now, committedAt time.Time) (time.Duration, bool) {
	r, res := v.r, v.res
	if !l.work.afterWrite(r, w, &v.err, &v.giveUp) {
		return 0, false
	}
	if isDeferral(res.err) {
		d, _ := retryAfter(res.err)
		l.work.retry(r, now.Add(d), true, "", now)
		return 0, false
	}
	if v.err == nil && (r.deleted || res.cloned) {
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
	l.failed(r, v.err, v.giveUp, res, now)
	return 0, false
}

// failed records a failed attempt: the request is given up on (held) or
// scheduled for a retry after RetryAfter's delay or the backoff.
func (l *loop[Obj]) failed(r *request[Obj], err error, giveUp bool, res *result[Obj], now time.Time) {
	msg := err.Error()
	if r.deleted {
		msg = "delete: " + msg
	}
	l.breaker.observe(false, giveUp, msg, r.attempts > 0, now, l.backoff)
	l.status.recent.add(recentError{key: r.key, err: msg, at: now})
	l.failLog.write(&r.loggedErr, &r.loggedAt, r.key, res.op, msg, r.attempts+1, now)
	r.attempts++
	if giveUp {
		l.work.hold(r, msg, errors.Is(err, ErrInvalidConfig), now)
		if errors.Is(err, ErrInvalidConfig) {
			l.log.Error("Reconciler misconfigured; the object is not reconciled", "key", printableKey(r.key), "error", err)
		}
		return
	}
	delay := l.backoff.delay(r.attempts)
	if d, ok := retryAfter(res.err); ok {
		delay = d
	}
	l.work.retry(r, now.Add(delay), false, msg, now)
	l.metrics.RetryScheduled()
}

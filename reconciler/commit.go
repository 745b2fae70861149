package reconciler

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/retry"
	"github.com/converge-go/converge/reconciler/internal/revs"
)

// What a result does, the same for both loops. The executor's outcome of
// an attempt is judged (what does it ask of the table?), the statuses of
// a commit are written in one write transaction (execute.go's writeAll,
// under the one status-write rule), and each request moves on according
// to how its write went: settled, retried or held. The breaker, the
// failure log, health's recent errors and the metrics see every failure,
// whichever loop's.
//
// In the per-object loop, while more work waits, a commit's writes go to
// the committer goroutine, so that the loop reads and dispatches the next
// round while they are written: at most maxOutJobs commits are out, one
// written and one queued behind it; they come back in order, and their
// requests wait in Committing until the loop lands them. A request
// replaced or settled meanwhile is told apart by its attempt id
// (writeBack), so a write that comes back late moves nothing on.

// outcome is what became of one request's attempt.
type outcome[Obj any] struct {
	r       *request[Obj]
	op      Op
	attempt uint64
	err     error            // what the operation returned (ErrTimeout when overdue)
	rev     statedb.Revision // the revision the operation saw
	target  Obj              // the operation's clone, if it had one
	// hasTarget: the operation was given target (else, overdue or a Sync,
	// the status is written into a clone of the object as last read).
	hasTarget bool
	// failures, when set, is the count of failures, this one included,
	// the backoff goes by instead of the request's own: a Sync that
	// failed as a whole backs off by the Syncs failed in a row.
	failures int
}

// verdict is what an outcome asks for. It holds values only: it waits,
// with its write, while the write is out on the committer.
type verdict[Obj any] struct {
	outcome[Obj]
	failed error  // the failure as the status reports it; nil on success
	giveUp reqWhy // why it is given up on (whyNone: retried)
	write  int    // index of its write in the commit's writes, or -1
}

// commitJob is one commit: the verdicts that wait for their writes, the
// writes, and when it was judged. Only the writes go to the committer.
type commitJob[Obj any] struct {
	verdicts []verdict[Obj]
	writes   []statusWrite[Obj]
	judged   int       // outcomes judged, written or not
	oldest   time.Time // when the longest-waiting of them was queued
	at       time.Time // when they were judged
	// committedAt is when its write transaction was committed; ok is
	// false for one aborted at Stop.
	committedAt time.Time
	ok          bool
}

// committer is the commit stage of a loop.
type committer[Obj comparable] struct {
	*reconciler[Obj]
	t       *requests[Obj]
	status  *healthState
	backoff retry.Backoff
	breaker retry.Breaker
	failLog retry.FailureLog
	// own are the revisions of this reconciler's latest status writes:
	// reading changes, the loop recognizes their echoes by them.
	own revs.Ranges

	// pipelines is set in the per-object loop: its commits may go to the
	// committer goroutine. The committer goroutine's: jobs to it, back
	// from it, and the ranges it wrote, published before each commit.
	// The loop's: the jobs not in use, how many are out, and those back
	// and not landed yet.
	pipelines  bool
	jobs, back chan *commitJob[Obj]
	done       chan struct{}
	written    revs.Shared
	spare      []*commitJob[Obj]
	out        int
	got        []*commitJob[Obj]

	lastRound RoundInfo
	realized  []time.Duration
}

// maxOutJobs is how many commits may be out on the committer at once.
const maxOutJobs = 2

// forcePipelined, set by tests only, sends every commit with writes to the
// committer, so that the model test covers what may happen to requests
// while they wait in Committing.
var forcePipelined atomic.Bool

func newCommitter[Obj comparable](r *reconciler[Obj], t *requests[Obj], status *healthState) *committer[Obj] {
	return &committer[Obj]{reconciler: r, t: t, status: status,
		backoff: retry.NewBackoff(r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax),
		breaker: retry.Breaker{Log: r.log}, failLog: retry.NewFailureLog(r.log)}
}

// judge decides what an outcome asks of the table: the verdict, and the
// status write if there is one (w.key is "" when there is none).
func (c *committer[Obj]) judge(o *outcome[Obj], now time.Time) (v verdict[Obj], w statusWrite[Obj]) {
	r := o.r
	c.t.setTried(r) // its result is in: the change has been attempted
	v = verdict[Obj]{outcome: *o, write: -1}
	if o.err != nil && !isDeferral(o.err) {
		v.giveUp, v.failed = c.failure(o.err, r.attempts)
	}
	if r.deleted || isDeferral(o.err) {
		return v, w // nothing to write
	}
	w = statusWrite[Obj]{key: r.key, obj: r.obj, rev: o.rev, target: o.target, expect: r.expect,
		fenced: c.cfg.Ownership != nil}
	if !o.hasTarget {
		// Overdue (the operation still holds its clone), or a Sync: the
		// status goes into a copy of the object as last read. A broken
		// CloneObject is said in the object too, through a plain copy.
		w.rev = r.rev
		var err error
		if w.target, err = c.clone(r.obj); err != nil {
			w.target, _ = shallowCopy(r.obj)
			v.failed, v.giveUp = err, whyMisconfigured
		}
	}
	w.status = Status{Kind: StatusKindDone, UpdatedAt: now}
	if v.failed != nil {
		w.status = Status{Kind: StatusKindError, UpdatedAt: now, Error: v.failed.Error()}
		if r.expect.Kind == StatusKindError && r.expect.Error == w.status.Error {
			// Failed as the object says already: skip the write (and the
			// change it would echo back). In a retry storm this is most
			// of the work.
			return v, statusWrite[Obj]{}
		}
	}
	return v, w
}

// judgeInto judges o into job: a verdict with nothing to write moves its
// request on at once, the others wait in Committing for their writes.
func (c *committer[Obj]) judgeInto(job *commitJob[Obj], o *outcome[Obj], now time.Time) {
	v, w := c.judge(o, now)
	job.judged++
	job.oldest = earlier(job.oldest, o.r.pickedAt)
	if w.key == "" {
		c.settle(&v, nil, time.Time{}, now)
		return
	}
	v.write = len(job.writes)
	job.writes = append(job.writes, w)
	job.verdicts = append(job.verdicts, v)
	c.t.writeOut(o.r, o.attempt, now)
}

// newJob returns an empty commit, judged at now.
func (c *committer[Obj]) newJob(now time.Time) *commitJob[Obj] {
	var job *commitJob[Obj]
	if n := len(c.spare); n > 0 {
		job, c.spare = c.spare[n-1], c.spare[:n-1]
	} else {
		job = &commitJob[Obj]{}
	}
	job.at, job.oldest = now, now
	return job
}

// hasRoom reports whether a commit can be made: fewer than maxOutJobs
// are out or back and not landed.
func (c *committer[Obj]) hasRoom() bool { return c.out+len(c.got) < maxOutJobs }

// release takes back a job the loop is done with, emptied.
func (c *committer[Obj]) release(job *commitJob[Obj]) {
	clear(job.verdicts)
	clear(job.writes)
	*job = commitJob[Obj]{verdicts: job.verdicts[:0], writes: job.writes[:0]}
	c.spare = append(c.spare, job)
}

// commit writes job's statuses: on the committer goroutine while a
// backlog waits (pipelined) or a commit is out already (they land in
// order), else inline, so that a lone change takes no extra hop.
func (c *committer[Obj]) commit(ctx context.Context, job *commitJob[Obj], pipelined bool, now time.Time) {
	switch {
	case ctx.Err() != nil:
		// Stopping: nothing is written after Stop.
	case len(job.writes) > 0 && c.pipelines && (c.out > 0 || pipelined || forcePipelined.Load()):
		c.send(ctx, job)
		return
	default:
		job.committedAt, job.ok = c.writeAll(ctx, job.writes, &c.own)
		if job.ok {
			c.landJob(job, now)
		}
	}
	c.release(job)
}

// send hands job to the committer goroutine, starting it the first time.
func (c *committer[Obj]) send(ctx context.Context, job *commitJob[Obj]) {
	if c.jobs == nil {
		c.jobs = make(chan *commitJob[Obj], maxOutJobs)
		c.back = make(chan *commitJob[Obj], maxOutJobs)
		c.done = make(chan struct{})
		go func() {
			defer close(c.done)
			for job := range c.jobs {
				job.committedAt, job.ok = c.writeAll(ctx, job.writes, &c.written)
				c.back <- job
			}
		}()
	}
	c.out++
	c.jobs <- job
}

// backCh is the channel the loop waits on while a job is out; nil
// otherwise. receive keeps a job that came back, for land.
func (c *committer[Obj]) backCh() <-chan *commitJob[Obj] {
	if c.out == 0 {
		return nil
	}
	return c.back
}

func (c *committer[Obj]) receive(job *commitJob[Obj]) {
	c.out--
	c.got = append(c.got, job)
}

// land moves on the requests of the jobs that came back, oldest first,
// and reports whether there were any. A job aborted at Stop moves nothing.
func (c *committer[Obj]) land(now time.Time) bool {
	for drained := false; c.out > 0 && !drained; {
		select {
		case job := <-c.back:
			c.receive(job)
		default:
			drained = true
		}
	}
	did := len(c.got) > 0
	for _, job := range c.got {
		if job.ok {
			c.landJob(job, now)
		}
		c.release(job)
	}
	clear(c.got)
	c.got = c.got[:0]
	return did
}

// ownWrites adds the revisions the committer goroutine wrote to own.
func (c *committer[Obj]) ownWrites() {
	if c.jobs != nil {
		c.written.MoveTo(&c.own)
	}
}

// stop ends the committer goroutine once its jobs are done (aborted: the
// run's context has ended by then).
func (c *committer[Obj]) stop() {
	if c.jobs != nil {
		close(c.jobs)
		<-c.done
	}
}

// landJob moves on the requests of a commit whose writes are in the
// table, and reports the round.
func (c *committer[Obj]) landJob(job *commitJob[Obj], now time.Time) {
	realized := c.realized[:0]
	for i := range job.verdicts {
		v := &job.verdicts[i]
		if !c.t.writeBack(v.r, v.attempt) {
			continue // replaced or settled while its write was out
		}
		if d, ok := c.settle(v, &job.writes[v.write], job.committedAt, now); ok {
			realized = append(realized, d)
		}
	}
	c.reportRealized(realized)
	c.realized = realized[:0]
	if n := job.judged; n > 0 {
		d := time.Since(job.oldest)
		c.metrics.Round(n, d)
		c.lastRound = RoundInfo{At: job.at, Objects: n, Duration: d}
	}
}

// settle moves a request on once its write (w; nil when it had none) went
// as it went. It returns the realization latency of a change it marked
// Done. The one rule: a write that did not land leaves a request that
// still owes the work, unless a newer request exists.
func (c *committer[Obj]) settle(v *verdict[Obj], w *statusWrite[Obj], committedAt, now time.Time) (time.Duration, bool) {
	r := v.r
	if w != nil {
		switch w.outcome {
		case writeSuperseded: // a newer request, or the delete, follows
			c.t.settle(r)
			return 0, false
		case writeNotOwned:
			c.t.lose(r.key, r.deleted, r.askedAt)
			return 0, false
		case writeOwed:
			// An earlier attempt's write landed late (the key was given
			// away and gained meanwhile): run again at once, from the
			// table as it is now, and write over what it found.
			c.t.setExpect(r, w.current)
			c.t.retry(r, now, whyOwed, "", now)
			return 0, false
		case writeKeyChanged:
			v.failed, v.giveUp = errKeyChanged, whyMisconfigured
		case writeLanded:
			if w.status.Kind == StatusKindError {
				c.t.setExpect(r, w.status) // what the table now holds
			}
		}
	}
	if isDeferral(v.err) {
		d, _ := retryAfter(v.err)
		c.t.retry(r, now.Add(d), whyDeferred, "", now)
		return 0, false
	}
	if v.failed != nil {
		c.fail(v, now)
		return 0, false
	}
	c.breaker.Observe(true, false, "", r.attempts > 0, now, c.backoff)
	start := r.requestedAt
	c.t.settle(r)
	if w == nil || start.IsZero() || committedAt.IsZero() || committedAt.Before(start) {
		return 0, false
	}
	return committedAt.Sub(start), true
}

// fail records a failed attempt: the request is given up on (Held, and
// refreshed RefreshInterval later) or retried after RetryAfter's delay or
// the backoff.
func (c *committer[Obj]) fail(v *verdict[Obj], now time.Time) {
	r := v.r
	msg := v.failed.Error()
	if r.deleted {
		msg = "delete: " + msg
	}
	c.breaker.Observe(false, v.giveUp != whyNone, msg, r.attempts > 0, now, c.backoff)
	c.status.recent.add(recentError{key: r.key, err: msg, at: now})
	c.failLog.Write(&r.loggedErr, &r.loggedAt, printableKey(r.key), string(v.op), msg, r.attempts+1, now)
	r.attempts++
	if v.giveUp != whyNone {
		var refreshAt time.Time
		if c.cfg.RefreshInterval != Off && c.cfg.SyncOperations == nil && !r.deleted {
			refreshAt = now.Add(c.cfg.RefreshInterval)
		}
		c.t.hold(r, v.giveUp, msg, refreshAt, now)
		if v.giveUp == whyMisconfigured {
			c.log.Error("Reconciler misconfigured; the object is not reconciled", "key", printableKey(r.key), "error", v.failed)
		}
		return
	}
	failures := r.attempts
	if v.failures > 0 {
		failures = v.failures
	}
	delay, why := c.backoff.Delay(failures), whyBackoff
	if d, ok := retryAfter(v.err); ok {
		delay, why = d, whyRetryAfter
	}
	c.t.retry(r, now.Add(delay), why, msg, now)
	c.metrics.RetryScheduled()
}

var errKeyChanged = fmt.Errorf("%w: Config.SetObjectStatus changed the object's primary key", ErrInvalidConfig)

// statusWrite is one status write into the table.
type statusWrite[Obj any] struct {
	key    string
	obj    Obj              // the object the operation saw (its primary key finds the current one)
	rev    statedb.Revision // its revision
	target Obj              // the copy to write when the object is unchanged
	expect Status           // this reconciler's status the write requires in the table
	status Status           // the status to write
	// fenced is set with Config.Ownership: the write lands only if this
	// replica owns the key when it is made, in the write transaction.
	fenced  bool
	outcome writeOutcome
	// current is this reconciler's status found in the table when the
	// write did not land for want of expect.
	current Status
}

// writeOutcome is what became of a status write.
type writeOutcome uint8

const (
	writeLanded     writeOutcome = iota
	writeSuperseded              // our status is a newer request now, or the object went: the change iterator delivers it
	writeOwed                    // our status is a Done or Error the request did not expect: no newer request follows
	writeNotOwned                // this replica does not own the key (Config.Ownership)
	writeKeyChanged              // SetObjectStatus returned an object with another primary key
)

// writeStatus stores w's status if, and only if, this reconciler's status
// in the current object is still the one the request expects, whatever
// else changed (the data, another reconciler's status in a StatusSet),
// and, for a fenced write, this replica owns the key. Otherwise it says
// what it found instead (settle acts on it). When the object is exactly
// the one the operation saw, the operation's clone is written, keeping
// what Update set on it.
func (c *committer[Obj]) writeStatus(wtxn statedb.WriteTxn, w *statusWrite[Obj]) writeOutcome {
	if w.fenced && !c.ownsKey(w.key) {
		return writeNotOwned
	}
	if outcome, done := c.swap(wtxn, w, w.rev, c.cfg.SetObjectStatus(w.target, w.status)); done {
		return outcome
	}
	cur, rev, found := c.cfg.Table.Get(wtxn, c.queryOf(w.obj))
	if !found {
		return writeSuperseded // deleted: the delete follows
	}
	if st := c.cfg.GetObjectStatus(cur); !sameStatus(st, w.expect) {
		w.current = st
		if st.IsPendingOrRefreshing() || !st.Kind.Valid() || st.Kind == StatusKindUnset {
			return writeSuperseded // a newer request (Unset: to withdraw this one) follows
		}
		return writeOwed
	}
	clone, err := c.clone(cur)
	if err != nil {
		clone, _ = shallowCopy(cur) // the Error that says so, written all the same
	}
	if outcome, done := c.swap(wtxn, w, rev, c.cfg.SetObjectStatus(clone, w.status)); done {
		return outcome
	}
	return writeSuperseded
}

// swap writes obj, which SetObjectStatus returned, over the object at
// revision rev. done is false when that object is no longer there at rev
// but its key is (the caller looks at what replaced it). The key is
// computed only when the swap fails: revisions are unique across the
// table, so a swap that succeeded replaced this very object; and statedb
// writes nothing, and reports no error, for an object without a primary
// key (hadOld false).
func (c *committer[Obj]) swap(wtxn statedb.WriteTxn, w *statusWrite[Obj], rev statedb.Revision, obj Obj) (writeOutcome, bool) {
	_, hadOld, err := c.cfg.Table.CompareAndSwap(wtxn, rev, obj)
	switch {
	case err == nil && hadOld:
		return writeLanded, true
	case err == nil, c.keyOf(obj) != w.key:
		return writeKeyChanged, true
	case !errors.Is(err, statedb.ErrRevisionNotEqual):
		return writeSuperseded, true // deleted meanwhile: the delete follows
	}
	return 0, false
}

package reconciler

import (
	"context"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/health"
	"github.com/converge-go/converge/reconciler/internal/pipeline"
	"github.com/converge-go/converge/reconciler/internal/retry"
	"github.com/converge-go/converge/reconciler/internal/revs"
)

// What a result does, the same for both loops: the outcome of an attempt
// is judged (what does it ask of the table?), the statuses of a commit are
// written in one write transaction under one rule (writeStatus: is the
// write still this reconciler's? statuswrite.go), and each request moves on as its write
// went (settle): settled, retried or held (failure.go).
//
// In the per-object loop, while more work waits, a commit's writes go to
// the committer goroutine (internal/pipeline), so that the loop reads and
// dispatches the next round meanwhile: at most maxOutJobs commits are out,
// one written and one queued behind it; they come back in order, and their
// requests wait in Committing until the loop lands them. A request
// replaced or settled meanwhile is told apart by its attempt id
// (writeBack), so a write that comes back late moves nothing.

// committer is the commit stage of a loop.
type committer[Obj comparable] struct {
	*reconciler[Obj]
	t       *requests[Obj]
	status  *health.State
	backoff retry.Backoff
	breaker retry.Breaker
	failLog retry.FailureLog
	// own are the revisions of this reconciler's latest status writes:
	// reading changes, the loop recognizes their echoes by them.
	own revs.Ranges

	// pipe is the committer goroutine (per-object loop only; nil in a
	// whole-set loop, which writes inline), written the ranges it wrote,
	// published before each commit, and spare the jobs not in use.
	pipe    *pipeline.Stage[*commitJob[Obj]]
	written revs.Shared
	spare   []*commitJob[Obj]
	held    *commitJob[Obj] // a job that waits for more results (ordering.holds)

	lastRound RoundInfo
	buf       []time.Duration // realization latencies of the commit landing
}

// maxOutJobs is how many commits may be out on the committer at once.
const maxOutJobs = 2

// forcePipelined, set by tests only, sends every commit with writes to the
// committer, so that the model test covers what may happen to requests
// while they wait in Committing.
var forcePipelined atomic.Bool

func newCommitter[Obj comparable](r *reconciler[Obj], t *requests[Obj], status *health.State) *committer[Obj] {
	return &committer[Obj]{reconciler: r, t: t, status: status,
		backoff: retry.NewBackoff(r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax),
		breaker: retry.Breaker{Log: r.log}, failLog: retry.NewFailureLog(r.log)}
}

// outcome turns a worker's result into the outcome of its request, or
// reports false for a result nobody waits for any more (its request was
// replaced, it already counted as failed at its timeout, or its key is
// another replica's now).
func (c *committer[Obj]) outcome(res *result[Obj], now time.Time) (outcome[Obj], bool) {
	r := res.row // still key's row while its key is (bare resets a row it forgets)
	if r == nil || r.key != res.key || res.key == "" {
		r = c.t.rows[res.key]
	}
	switch {
	case r == nil:
		return outcome[Obj]{}, false
	case res.overdue:
		if !c.t.overdue(r, res.attempt) {
			return outcome[Obj]{}, false
		}
		res.err = timeoutError(res.op, c.cfg.OperationTimeout)
		c.metrics.Operation(res.op, ResultTimeout, 1, c.cfg.OperationTimeout)
	case !c.t.returned(r, res.attempt, now):
		return outcome[Obj]{}, false
	}
	switch {
	case res.notOwned && c.ownsKey(r.key):
		c.t.requeue(r, now) // owned again since the worker looked: start anew
		return outcome[Obj]{}, false
	case res.notOwned || !c.ownsKey(r.key):
		c.t.lose(r.key, r.deleted, r.askedAt) // no status is written for another replica's key
		return outcome[Obj]{}, false
	}
	return outcome[Obj]{r: r, op: res.op, attempt: res.attempt, err: res.err, rev: res.rev,
		target: res.target, hasTarget: res.cloned, declined: res.declined}, true
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
	lone := c.t.order.lone(o.r) // before judge marks it tried: its class as queued
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
	job.urgent = job.urgent || lone
}

// newJob returns the commit held open (ordering.holds), or an empty one judged at
// now.
func (c *committer[Obj]) newJob(now time.Time) *commitJob[Obj] {
	job := c.held
	if c.held = nil; job != nil {
		return job
	}
	if n := len(c.spare); n > 0 {
		job, c.spare = c.spare[n-1], c.spare[:n-1]
	} else {
		job = &commitJob[Obj]{}
	}
	job.at, job.oldest = now, now
	return job
}

// hasRoom reports whether a commit can be made: fewer than maxOutJobs
// are out, or back and not landed.
func (c *committer[Obj]) hasRoom() bool { return c.pipe == nil || c.pipe.Pending() < maxOutJobs }

// release takes back a job the loop is done with, emptied.
func (c *committer[Obj]) release(job *commitJob[Obj]) {
	clear(job.verdicts)
	clear(job.writes)
	*job = commitJob[Obj]{verdicts: job.verdicts[:0], writes: job.writes[:0]}
	c.spare = append(c.spare, job)
}

// commit writes job's statuses: on the committer goroutine while a
// backlog waits (pipelined) or a commit is out already (they land in
// order), else inline, so that a lone change takes no extra hop. A job
// that holds returns when it is to be written at the latest.
func (c *committer[Obj]) commit(ctx context.Context, job *commitJob[Obj], pipelined bool, now time.Time) time.Time {
	switch {
	case ctx.Err() != nil:
		// Stopping: nothing is written after Stop.
	case c.t.order.holds(job, pipelined, c.cfg.RoundSize, now):
		c.held = job
		return job.holdUntil()
	case len(job.writes) > 0 && c.pipe != nil && (c.pipe.Out() > 0 || pipelined || forcePipelined.Load()):
		c.pipe.Send(job, func(job *commitJob[Obj]) {
			job.committedAt, job.ok = c.writeAll(ctx, job.writes, &c.written)
		})
		return time.Time{}
	default:
		job.committedAt, job.ok = c.writeAll(ctx, job.writes, &c.own)
		if job.ok {
			c.landJob(job, now)
		}
		if job.ok && len(job.writes) > 0 {
			yieldToWoken()
		}
	}
	c.release(job)
	return time.Time{}
}

// yieldToWoken lets the goroutines a status commit on the loop woke
// run before the rest of the loop's step: whoever waits for those
// objects to be Done. Go runs a goroutine woken by a running one next on
// the same processor, after the waker blocks, unless an idle processor
// wakes up and takes it first, which takes a thread's wake-up and a few
// microseconds more; without the yield, a lone change is seen Done only
// once the loop has read its own write back, reported and gone to sleep
// (benchmarks/README.md, latency/isolated). Only inline commits yield:
// when no backlog waits, so the loop's own work can wait that long.
func yieldToWoken() { runtime.Gosched() }

// heldDue reports whether a job held open is to be written by now.
func (c *committer[Obj]) heldDue(now time.Time) bool {
	return c.held != nil && !now.Before(c.held.holdUntil())
}

// land moves on the requests of the jobs that came back from the
// committer goroutine, oldest first, and reports whether there were any.
// A job aborted at Stop moves nothing.
func (c *committer[Obj]) land(now time.Time) bool {
	if c.pipe == nil {
		return false
	}
	back := c.pipe.Returned()
	for _, job := range back {
		if job.ok {
			c.landJob(job, now)
		}
		c.release(job)
	}
	return len(back) > 0
}

// ownWrites adds the revisions the committer goroutine wrote to own.
func (c *committer[Obj]) ownWrites() {
	if c.pipe != nil && c.pipe.Started() {
		c.written.MoveTo(&c.own)
	}
}

// ownWrite reports whether rev, not read yet, is one of this
// reconciler's status writes (Explain asks; nothing is dropped).
func (c *committer[Obj]) ownWrite(rev statedb.Revision) bool {
	c.ownWrites()
	return c.own.Contains(rev)
}

// landJob moves on the requests of a commit whose writes are in the
// table, and reports the round.
func (c *committer[Obj]) landJob(job *commitJob[Obj], now time.Time) {
	c.t.deps.fresh() // its Done writes are in the table now
	realized := c.buf[:0]
	for i := range job.verdicts {
		v := &job.verdicts[i]
		if !c.t.writeBack(v.r, v.attempt) {
			continue // replaced or settled while its write was out
		}
		if d, ok := c.settle(v, &job.writes[v.write], job.committedAt, now); ok {
			realized = append(realized, d)
		}
	}
	reportRealized(c.reconciler, realized)
	c.buf = realized[:0]
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
	c.obs.settled(v, w, committedAt)
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
	if r.deleted {
		c.t.deleted.add(r.key, r.rev, now)
	}
	var deps []string
	if c.t.deps != nil && !r.deleted {
		deps = c.t.deps.depsOfRow(r) // before settle frees the row's detail
	}
	key, deleted := r.key, r.deleted
	c.t.settle(r)
	if c.t.deps != nil {
		c.t.depSettled(key, deps, deleted, now) // released in the step that commits the Done
	}
	if w == nil || start.IsZero() || committedAt.IsZero() || committedAt.Before(start) {
		return 0, false
	}
	return committedAt.Sub(start), true
}

package reconciler

import (
	"fmt"
	"time"

	"github.com/cilium/statedb"
)

// Answering Explain from the outstanding work, for both loops.

// explainParts are what a loop adds to its outstanding work when it
// answers Explain: its marks, and why work waits in it now.
type explainParts struct {
	readTo      statedb.Revision
	initialized bool
	whole       bool // a whole-set loop: a Sync is the executor
	// unreadWhy says why changes not read yet wait; queuedWhy why a
	// queued request waits.
	unreadWhy, queuedWhy string
	// retryAt is when a retry due at the given time may go (the
	// breaker's pacing), and breakerWhy why it waits, if it does.
	retryAt    func(due time.Time) time.Time
	breakerWhy string
	// timeout is how long an attempt may run (OperationTimeout; 0: none).
	timeout time.Duration
	// queuedTask reports whether a dispatched request's task still waits
	// for a worker (nil: never).
	queuedTask func(seq uint64) bool
	workerWhy  string
}

// reportSignal is the channel Explanation.Changed hands out: made when
// an answer asks for it, closed at the loop's next report.
type reportSignal struct{ ch chan struct{} }

// wait returns the channel closed at the next report.
func (s *reportSignal) wait() <-chan struct{} {
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// reported closes the channel handed out, if any.
func (s *reportSignal) reported() {
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// explainKey answers Explain for key from w, the table's current snapshot
// and the loop's parts p.
func (r *reconciler[Obj]) explainKey(w *work[Obj], key string, p explainParts, now time.Time) Explanation {
	e := Explanation{
		Reconciler:  r.id.DisplayName(),
		Key:         printableKey(key),
		ReadTo:      p.readTo,
		Suspended:   r.suspended(),
		Initialized: p.initialized,
		At:          now,
	}
	obj, rev, found := r.getByKey(r.db.ReadTxn(), key)
	if found {
		e.InTable, e.Status = true, r.cfg.GetObjectStatus(obj)
	}
	if req := w.byKey[key]; req != nil && req.state != stGone {
		r.explainRequest(&e, req, p)
		return e
	}
	if at, unowned := w.unowned[key]; unowned || !r.ownsKey(key) {
		e.State, e.Reason = KeyNotOwned, "another replica owns the key"
		if unowned {
			e.Revision = at
		}
		return e
	}
	switch {
	case !found:
		e.State, e.Reason = KeyAbsent, "no object with this key, nothing outstanding (a Delete, if one was due, succeeded)"
	case rev > p.readTo:
		e.State, e.Reason, e.Revision = KeyUnread, p.unreadWhy, rev
	case e.Status.Kind == StatusKindUnset:
		e.State, e.Reason = KeyUnset, "its status is Unset: it asks nothing of this reconciler"
	case e.Status.Kind == StatusKindDone:
		e.State, e.Reason = KeyDone, "reconciled"
		if busy := w.byKey[key]; busy != nil && busy.running != 0 {
			e.Reason = "reconciled; an earlier attempt that ran past its timeout still runs"
		}
		e.NextAttempt = r.nextRefresh(e.Status, p)
	case e.Status.Kind == StatusKindError:
		e.State, e.Reason, e.LastError = KeyGivenUp, "failed, with no retry outstanding", e.Status.Error
		e.NextAttempt = r.nextRefresh(e.Status, p)
	default:
		e.State, e.Reason, e.Revision = KeyUnread, p.unreadWhy, rev
	}
	return e
}

// explainRequest fills e in from the request outstanding for its key.
func (r *reconciler[Obj]) explainRequest(e *Explanation, req *request[Obj], p explainParts) {
	e.Deleted, e.Revision, e.Attempts, e.LastError = req.deleted, req.askedAt, req.attempts, req.err
	e.Since = req.enteredAt
	op := "Update"
	if req.deleted {
		op = "Delete"
	}
	switch req.state {
	case stQueued:
		e.State, e.Reason = KeyQueued, p.queuedWhy
		if req.running != 0 {
			e.State, e.Reason = KeyBusy, "waiting for an earlier attempt on the key to return"
			if req.stuck {
				e.Reason = "waiting for an earlier attempt on the key, past its timeout, to return"
			}
		}
	case stRunning:
		if p.queuedTask != nil && p.queuedTask(req.taskSeq) {
			e.State, e.Reason = KeyQueued, p.workerWhy
			break
		}
		e.State, e.Since = KeyRunning, req.startedAt
		e.Reason = op + " in flight"
		if p.whole {
			e.Reason = "in the running Sync"
		}
		if p.timeout > 0 {
			e.Reason += fmt.Sprintf("; times out after %s", p.timeout)
		}
	case stCommitting:
		e.State, e.Reason = KeyCommitting, "its result is in; its status is being written"
	case stRetrying:
		explainRetry(e, req, p)
	case stHeld:
		e.State = KeyGivenUp
		switch {
		case req.blocked:
			e.Reason = "given up on: a misconfiguration (see the error)"
		case req.exhausted:
			e.Reason = "given up on: MaxRetries spent"
		default:
			e.Reason = "given up on: a Permanent error"
		}
		if e.NextAttempt = r.nextRefresh(e.Status, p); e.NextAttempt.IsZero() {
			e.Reason += "; only a change retries it"
		} else {
			e.Reason += "; refresh retries it"
		}
	}
}

// explainRetry fills e in for a request waiting for its retry.
func explainRetry[Obj any](e *Explanation, req *request[Obj], p explainParts) {
	e.State = KeyRetrying
	e.NextAttempt = p.retryAt(req.due)
	switch {
	case req.deferred:
		e.Reason = "not ready yet (RetryAfter without an error): retried at its delay"
	case p.breakerWhy != "" && e.NextAttempt.After(req.due):
		e.Reason = p.breakerWhy
	case req.retryAfter:
		e.Reason = "retried after the delay the operation asked for (RetryAfter)"
	default:
		e.Reason = fmt.Sprintf("backoff after %d failure(s)", req.attempts)
	}
	if p.whole && !req.deferred {
		e.Reason += "; retried by the next Sync"
	}
}

// nextRefresh is when refresh marks an object whose status is st, or
// zero when refresh is off.
func (r *reconciler[Obj]) nextRefresh(st Status, p explainParts) time.Time {
	if r.cfg.RefreshInterval == Off || p.whole || st.UpdatedAt.IsZero() {
		return time.Time{}
	}
	return st.UpdatedAt.Add(r.cfg.RefreshInterval)
}

// explain answers Explain in the per-object loop.
func (l *loop[Obj]) explain(key string, now time.Time) Explanation {
	p := explainParts{
		readTo:      l.readTo,
		initialized: l.initialized,
		timeout:     l.cfg.OperationTimeout,
		retryAt:     l.breaker.nextRetry,
		unreadWhy:   l.unreadWhy(),
		queuedWhy:   l.queuedWhy(),
		queuedTask:  l.exec.waitsForWorker,
		workerWhy: fmt.Sprintf("waiting for a worker: %d operation(s) running, Concurrency %d",
			l.exec.executing(), l.cfg.Concurrency),
	}
	if l.breaker.open {
		p.breakerWhy = fmt.Sprintf("breaker open: every attempt fails with %q; held retries go one at a time", l.breaker.lastErr)
	}
	e := l.explainKey(l.work, key, p, now)
	e.Changed = l.reportSig.wait()
	return e
}

// unreadWhy says why a change not read yet waits.
func (l *loop[Obj]) unreadWhy() string {
	switch {
	case l.suspended():
		return "suspended: nothing is read or started until Resume"
	case l.full.draining():
		return "held while a full reconciliation waits for the operations in flight and prunes"
	case l.roundRoom() <= 0:
		return fmt.Sprintf("waiting for room in a round: %d request(s) outstanding, RoundSize %d",
			len(l.work.active)-l.work.committing-l.work.keyBusy, l.cfg.RoundSize)
	}
	return "not read yet: the next round reads it"
}

// queuedWhy says why a queued request waits.
func (l *loop[Obj]) queuedWhy() string {
	switch {
	case l.suspended():
		return "suspended: nothing is started until Resume"
	case l.full.draining():
		return "held while a full reconciliation waits for the operations in flight and prunes"
	}
	return fmt.Sprintf("waiting for a worker: %d operation(s) running, Concurrency %d", l.work.running, l.cfg.Concurrency)
}

// explain answers Explain in the whole-set loop.
func (s *syncLoop[Obj]) explain(key string, now time.Time) Explanation {
	p := explainParts{
		readTo:      s.readTo,
		initialized: s.initialized,
		whole:       true,
		timeout:     s.cfg.OperationTimeout,
		retryAt:     func(due time.Time) time.Time { return due },
		unreadWhy:   "not read yet: read when the debounce allows, and always by the next Sync",
		queuedWhy:   "waiting for the next Sync (debounce)",
	}
	switch {
	case s.suspended():
		p.queuedWhy = "suspended: no Sync starts until Resume"
	case !s.initialized:
		p.queuedWhy = "the first Sync waits until the table is initialized"
	case !s.leading():
		p.queuedWhy = "another replica leads: it syncs"
	case s.down:
		p.queuedWhy = "the target is down: the next Sync waits for its retry"
	}
	e := s.explainKey(s.work, key, p, now)
	e.Changed = s.reportSig.wait()
	return e
}

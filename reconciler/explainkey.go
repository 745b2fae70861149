package reconciler

import (
	"fmt"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/workers"
)

// How a loop answers Explain: what it adds to the request table (its
// marks, and why work waits in it now), and how one key's row, or its
// absence, reads as an Explanation. The answer is made on the loop's
// goroutine, so it agrees with the request table at that moment.

func fmtWorkers(running, concurrency int) string {
	return fmt.Sprintf("waiting for a worker: %d operation(s) running, Concurrency %d", running, concurrency)
}

func fmtRoom(outstanding, roundSize int) string {
	return fmt.Sprintf("waiting for room in a round: %d request(s) outstanding, RoundSize %d", outstanding, roundSize)
}

func fmtBreaker(err string) string {
	return fmt.Sprintf("breaker open: every attempt fails with %q; held retries go one at a time", err)
}

// explainLoop answers Explain (explainKey) with why work waits
// in this loop now.
func explainLoop[Obj comparable](l *loop[Obj], key string, now time.Time) Explanation {
	p := explainParts{
		readTo:      l.readTo,
		initialized: l.initialized,
		timeout:     l.cfg.OperationTimeout,
		retryAt:     l.commits.breaker.NextRetry,
		task:        l.exec.Task,
		unreadWhy:   "not read yet: the next round reads it",
		queuedWhy:   fmtWorkers(l.exec.Executing(), l.cfg.Concurrency),
		ownWrite:    l.commits.ownWrite,
	}
	if l.t.deps != nil {
		p.blockedWhy = l.t.blockedWhy
	}
	if l.moreChanges {
		p.unreadWhy = fmt.Sprintf("not read yet: the reader is behind a backlog, read up to revision %d", l.readTo)
	}
	if o := l.t.order; o != nil {
		p.orderWhy = func(key string) string { return o.why(l.t.rows[key], now) }
		p.heldWhy = func(key string) string { return heldWhy(l.commits.held, l.t.rows[key], now) }
	}
	switch {
	case l.suspended():
		p.suspendedOrDraining = true
		p.unreadWhy, p.queuedWhy = "suspended: nothing is read or started until Resume", "suspended: nothing is started until Resume"
	case l.full.draining():
		p.suspendedOrDraining = true
		p.unreadWhy = "held while a full reconciliation waits for the operations in flight and prunes"
		p.queuedWhy = p.unreadWhy
	case l.roundRoom() <= 0:
		p.unreadWhy = fmtRoom(l.t.n[stQueued]+l.t.n[stRunning], l.cfg.RoundSize)
	}
	if l.commits.breaker.Open() {
		p.breakerWhy = fmtBreaker(l.commits.breaker.Err())
	}
	e := explainKey(l.reconciler, l.t, key, p, now)
	e.Changed = l.reportSig.wait()
	return e
}

// explainSync answers Explain (explainKey) with why work waits
// in this loop now.
func explainSync[Obj comparable](s *syncLoop[Obj], key string, now time.Time) Explanation {
	p := explainParts{readTo: s.readTo, initialized: s.initialized, whole: true, timeout: s.cfg.OperationTimeout,
		retryAt:   s.commits.breaker.NextRetry,
		ownWrite:  s.commits.ownWrite,
		unreadWhy: "not read yet: read when the debounce allows, and always by the next Sync",
		queuedWhy: "waiting for the next Sync (debounce)",
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
	if s.commits.breaker.Open() {
		p.breakerWhy = fmtBreaker(s.commits.breaker.Err())
	}
	e := explainKey(s.reconciler, s.t, key, p, now)
	e.Changed = s.reportSig.wait()
	return e
}

// explainParts are what a loop adds to its request table when it answers
// Explain: its marks, and why work waits in it now.
type explainParts struct {
	readTo      statedb.Revision
	initialized bool
	whole       bool // a whole-set loop: a Sync is the executor
	// unreadWhy says why changes not read yet wait; queuedWhy why a
	// queued row waits (and a dispatched one whose task waits for a
	// worker: queuedTask says which).
	unreadWhy, queuedWhy string
	// task says where the workers' task of a sequence number stands, and
	// since when it runs (nil in a whole-set loop).
	task func(seq uint64) (workers.TaskState, time.Time)
	// orderWhy, in ordered mode, says where the Queued row of a key waits
	// in the order (nil: queuedWhy).
	orderWhy func(key string) string
	// retryAt is when a retry due at the given time may go (the
	// breaker's pacing); breakerWhy says why, when the breaker is open.
	retryAt    func(due time.Time) time.Time
	breakerWhy string
	timeout    time.Duration // OperationTimeout (0: none)
	// suspendedOrDraining: nothing is handed out now, whatever the order.
	suspendedOrDraining bool
	// heldWhy, in ordered mode, says why a Committing row's status waits
	// to be written ("": it is being written).
	heldWhy func(key string) string
	// ownWrite reports whether the change at a revision not read yet is
	// one of this reconciler's status writes.
	ownWrite func(rev statedb.Revision) bool
	// blockedWhy, with Config.DependsOn, says what a Blocked row waits for.
	blockedWhy func(row string) string
}

// explainKey answers Explain for key from the request table t, the
// table's current snapshot and the loop's parts p.
func explainKey[Obj comparable](r *reconciler[Obj], t *requests[Obj], key string, p explainParts, now time.Time) Explanation {
	e := Explanation{Reconciler: r.id.DisplayName(), Key: printableKey(key), ReadTo: p.readTo,
		Suspended: r.suspended(), Initialized: p.initialized, At: now}
	txn := r.db.ReadTxn()
	obj, rev, found := r.getByKey(txn, key)
	if found {
		e.InTable, e.Status = true, r.cfg.GetObjectStatus(obj)
	}
	row := t.rows[key]
	switch {
	case row != nil && row.detail != nil && row.state != stRefreshDue:
		explainRow(&e, row, p)
		if row.state == stHeld {
			e.NextAttempt = row.due
			e.Reason += map[bool]string{true: "; only a change retries it", false: "; refresh retries it"}[row.due.IsZero()]
		}
	case row != nil && row.state == stNotOwned, !r.ownsKey(key):
		e.State, e.Reason = KeyNotOwned, "another replica owns the key"
		if row != nil {
			e.Revision = row.askedAt
		}
	case !found:
		e.State, e.Reason = KeyAbsent, "no object with this key, nothing outstanding (a Delete, if one was due, succeeded)"
		if at, drev, ok := t.deleted.find(key); ok {
			e.Deleted, e.Since = true, at
			e.Reason = fmt.Sprintf("deleted: its Delete succeeded (the delete at revision %d)", drev)
		} else if last := r.cfg.Table.Revision(txn); last > p.readTo {
			e.Reason = fmt.Sprintf("no object with this key; changes up to revision %d are not read yet (read up to %d): "+
				"if one of them deleted it, its Delete is to come", last, p.readTo)
		}
	case rev > p.readTo && !p.ownWrite(rev):
		// (A change past the reader that is this reconciler's own status
		// write, of a key read ahead of a backlog, asks nothing: settled.)
		e.State, e.Reason, e.Revision = KeyUnread, p.unreadWhy, rev
	case e.Status.Kind == StatusKindUnset:
		e.State, e.Reason = KeyUnset, "its status is Unset: it asks nothing of this reconciler"
	default:
		explainSettled(&e, row, r.cfg.RefreshInterval, p)
		if r.unreconciled.at(key, rev) {
			e.Reason = fmt.Sprintf("not reconciled: revision %d changed the object but kept its %s status; "+
				"a writer must write a changed object with StatusPending()", rev, e.Status.Kind)
		}
	}
	return e
}

// explainSettled fills e in for a key with nothing outstanding: Done (or
// failed with no retry kept), refreshed next at its refresh.
func explainSettled[Obj any](e *Explanation, row *request[Obj], interval time.Duration, p explainParts) {
	e.State, e.Reason = KeyDone, "reconciled"
	if e.Status.Kind == StatusKindError {
		e.State, e.Reason, e.LastError = KeyGivenUp, "failed, with no retry outstanding", e.Status.Error
	}
	if row != nil && row.running != 0 {
		e.Reason += "; an earlier attempt that ran past its timeout still runs"
	}
	switch {
	case row != nil && row.state == stRefreshDue:
		e.NextAttempt, e.Reason = row.due, e.Reason+"; its refresh was put off (the key was not owned at that moment)"
	case interval != Off && !p.whole && !e.Status.UpdatedAt.IsZero():
		e.NextAttempt = e.Status.UpdatedAt.Add(interval)
	}
}

// explainRow fills e in from a row with work outstanding.
func explainRow[Obj any](e *Explanation, row *request[Obj], p explainParts) {
	e.Deleted, e.Revision, e.Attempts, e.LastError, e.Since = row.deleted, row.askedAt, row.attempts, row.err, row.since
	op := "Update"
	if row.deleted {
		op = "Delete"
	}
	switch row.state {
	case stQueued:
		e.State, e.Reason = KeyQueued, p.queuedWhy
		if p.orderWhy != nil && !p.suspendedOrDraining {
			e.Reason = p.orderWhy(row.key)
		}
	case stBusy:
		e.State, e.Reason = KeyBusy, "waiting for an earlier attempt on the key to return"
		if row.stuck {
			e.Reason = "waiting for an earlier attempt on the key, past its timeout, to return"
		}
	case stRunning:
		explainRunning(e, row, op, p)
	case stCommitting:
		e.State, e.Reason = KeyCommitting, "its result is in; its status is being written"
		if p.heldWhy != nil {
			if why := p.heldWhy(row.key); why != "" {
				e.Reason = why
			}
		}
	case stRetrying:
		explainRetry(e, row, p)
	case stBlocked:
		e.State, e.Reason = KeyBlocked, p.blockedWhy(row.key)
	case stHeld:
		e.State = KeyGivenUp
		e.Reason = map[reqWhy]string{whyMisconfigured: "given up on: a misconfiguration (see the error)",
			whyExhausted: "given up on: MaxRetries spent",
			whyCycle:     "given up on: on a dependency cycle (see the error): never attempted until a key of it changes"}[row.why]
		if e.Reason == "" {
			e.Reason = "given up on: a Permanent error"
		}
	}
}

// explainRunning fills e in for a row whose attempt is out: its task
// waits for a worker, runs (since a worker started it, not since it was
// handed out), or has returned and its result waits to be taken.
func explainRunning[Obj any](e *Explanation, row *request[Obj], op string, p explainParts) {
	e.State, e.Since, e.Reason = KeyRunning, row.startedAt, op+" in flight"
	if p.whole {
		e.Reason = "in the running Sync"
	}
	if p.task != nil {
		switch st, at := p.task(row.taskSeq); st {
		case workers.TaskQueued:
			e.State, e.Reason = KeyQueued, p.queuedWhy
			return
		case workers.TaskReturned:
			e.State, e.Since = KeyCommitting, time.Time{}
			e.Reason = fmt.Sprintf("its result is in; it is taken with the round's others, within %s", workers.CommitDelay)
			return
		default:
			if !at.IsZero() { // else an idle worker takes it next: since it was handed out
				e.Since = at
			}
		}
	}
	if p.timeout > 0 {
		e.Reason += fmt.Sprintf("; times out after %s", p.timeout)
	}
}

// explainRetry fills e in for a row waiting for its retry.
func explainRetry[Obj any](e *Explanation, row *request[Obj], p explainParts) {
	e.State, e.NextAttempt = KeyRetrying, p.retryAt(row.due)
	e.Reason = map[reqWhy]string{
		whyDeferred:   "not ready yet (RetryAfter without an error): retried at its delay",
		whyRetryAfter: "retried after the delay the operation asked for (RetryAfter)",
		whyOwed:       "its status was written over by an earlier attempt: run again",
	}[row.why]
	switch {
	case p.breakerWhy != "" && e.NextAttempt.After(row.due):
		e.Reason = p.breakerWhy
	case e.Reason == "":
		e.Reason = fmt.Sprintf("backoff after %d failure(s)", row.attempts)
	}
	if p.whole && row.why != whyDeferred {
		e.Reason += "; retried by the next Sync"
	}
}

// heldWhy says why r's status waits in job, the commit held open for a
// burst's statuses (ordering.holds), or "" when it is not there.
func heldWhy[Obj any](job *commitJob[Obj], r *request[Obj], now time.Time) string {
	if job == nil || r == nil {
		return ""
	}
	for i := range job.verdicts {
		if v := &job.verdicts[i]; v.r == r && v.attempt == r.writing {
			return "its result is in; its status waits to be written with a burst's, " +
				relTime(job.holdUntil(), now) + " at the latest"
		}
	}
	return ""
}

// unreconciledWrites are the latest changes noticed that kept this
// reconciler's status, by key: a ring Explain looks in.
type unreconciledWrites struct {
	keys [64]string
	revs [64]statedb.Revision
	next int
}

func (u *unreconciledWrites) add(key string, rev statedb.Revision) {
	u.keys[u.next], u.revs[u.next] = string([]byte(key)), rev // a copy: key views the object's bytes
	u.next = (u.next + 1) % len(u.keys)
}

// at reports whether the change of key at rev was one.
func (u *unreconciledWrites) at(key string, rev statedb.Revision) bool {
	for i := range u.keys {
		if u.revs[i] == rev && u.keys[i] == key {
			return true
		}
	}
	return false
}

// recentDeletes are the latest successful deletes, by key: what Explain
// says of a key absent from the table, so that a key deleted here is
// told from one never seen. A key that has another request since (or
// that another replica now owns) is forgotten: its latest story is no
// longer that Delete.
type recentDeletes struct {
	slots [recentDeletesKept]deletedKey
	byKey map[string]int // key -> its slot
	next  int
}

type deletedKey struct {
	key string
	rev statedb.Revision
	at  time.Time
}

// recentDeletesKept is how many deletes Explain remembers (the doc of
// Explanation.Deleted says it).
const recentDeletesKept = 256

// add records that key's Delete of the delete at rev succeeded at at.
func (d *recentDeletes) add(key string, rev statedb.Revision, at time.Time) {
	if d.byKey == nil {
		d.byKey = map[string]int{}
	}
	d.forget(key)
	if old := d.slots[d.next].key; old != "" {
		delete(d.byKey, old)
	}
	key = string([]byte(key)) // a copy: key views the object's bytes
	d.slots[d.next] = deletedKey{key: key, rev: rev, at: at}
	d.byKey[key] = d.next
	d.next = (d.next + 1) % recentDeletesKept
}

// forget drops key: it has something newer to say. One length check
// when nothing is remembered.
func (d *recentDeletes) forget(key string) {
	if len(d.byKey) == 0 {
		return
	}
	if i, ok := d.byKey[key]; ok {
		d.slots[i] = deletedKey{}
		delete(d.byKey, key)
	}
}

// find returns when key's Delete succeeded, and the revision of its
// delete.
func (d *recentDeletes) find(key string) (time.Time, statedb.Revision, bool) {
	i, ok := d.byKey[key]
	if !ok {
		return time.Time{}, 0, false
	}
	return d.slots[i].at, d.slots[i].rev, true
}

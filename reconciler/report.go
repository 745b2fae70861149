package reconciler

import (
	"fmt"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/converge-go/converge/reconciler/internal/clock"
	"github.com/converge-go/converge/reconciler/internal/health"
)

// A report publishes, after a step, what the request table says: health,
// the status snapshot, the progress the waits watch and the gauges. Both
// loops report through publish; it walks the active rows once (about a
// round of them) and looks at the retry heaps' heads: work proportional
// to a round, never to the table.

// reportParts are what a loop adds to its request table in a report.
type reportParts struct {
	readTo      statedb.Revision // the last revision read from the change iterator
	initialized bool
	inFlight    int             // operations executing (a running Sync counts one)
	standby     bool            // a whole-set reconciler that does not lead: nothing is its work
	ownChanged  <-chan struct{} // the Ownership.Changed channel taken before the owned set was last looked at
	whole       health.Whole
	lastRound   RoundInfo
	lastFull    FullInfo
	healthTimer *clock.Timer
}

func publish[Obj comparable](r *reconciler[Obj], t *requests[Obj], h *health.State, hc cell.Health, now time.Time, p reportParts) {
	objects := r.cfg.Table.NumObjects(r.db.ReadTxn())
	h.Dirty = h.Dirty || t.dirty
	t.dirty = false
	failing := health.Failing{N: t.failing, First: func(n int) []error { return firstErrors(t, n) }}
	if p.standby {
		failing = health.Failing{}
	}
	if r.shared.err != nil {
		p.whole = health.Whole{Op: "status", Err: r.shared.err} // before any other: nothing is right while it holds
	}
	h.Report(hc, now, objects, r.suspended(), p.whole, p.healthTimer, failing)

	v := view(t, p.readTo, now)
	s := &StatusSnapshot{Module: r.id.ModuleID, Name: r.cfg.Name, Table: r.cfg.Table.Name(), Suspended: r.suspended(),
		Initialized: p.initialized, RecentErrors: recentErrors(h), UpdatedAt: now,
		FailingDeletes: t.failingDeletes, Retries: t.byDue.Len(), Waiting: len(t.active), InFlight: p.inFlight,
		LastRound: p.lastRound, LastFull: p.lastFull}
	if next, ok := t.nextDue(); ok {
		s.NextRetry = next
	}
	if len(t.active) > 0 {
		s.oldestSince = v.oldestPicked
	}
	pending, refreshing, errs, unowned, unset := t.kinds[StatusKindPending], t.kinds[StatusKindRefreshing],
		t.kinds[StatusKindError], t.n[stNotOwned], t.n[stUnset]
	s.Objects = ObjectCounts{Pending: pending, Refreshing: refreshing, Error: errs, Unowned: unowned, Unset: unset,
		Done: max(0, objects-pending-refreshing-errs-unowned-unset)}
	progress := progressOf(t, v)
	gauges := Gauges{Failing: t.failing, Waiting: len(t.active), InFlight: p.inFlight, Retries: t.byDue.Len(),
		OldestWaiting: max(now.Sub(v.oldestPicked), 0)}
	progress.ownChanged = p.ownChanged
	if p.standby {
		// Kept warm for a takeover, but no one's work here.
		s.Objects = ObjectCounts{Unowned: objects}
		s.FailingDeletes, s.Retries, s.NextRetry, s.Waiting, s.oldestSince = 0, 0, time.Time{}, 0, time.Time{}
		progress = progressValues{reconciled: p.readTo, retryLow: p.readTo + 1, ownChanged: p.ownChanged}
		gauges = Gauges{InFlight: p.inFlight}
	}
	// The snapshot before the progress, the progress before the gauges:
	// whoever a wait wakes sees a Status() at least as new as what it
	// waited for, and whoever the metrics wake sees the progress too.
	r.snapshot.Store(s)
	r.progress.set(progress)
	r.metrics.Gauges(gauges)
}

// tableView is one report's reading of the request table.
type tableView[Obj any] struct {
	// Every change up to reconciled has been attempted; retryLow is the
	// lowest revision of a change not settled yet (reconciled+1 when
	// none).
	reconciled, retryLow statedb.Revision
	// oldestPicked is when the longest-waiting active row was queued.
	oldestPicked time.Time
	// oldest is the unsettled row with the lowest revision (nil: none).
	oldest *request[Obj]
}

// view reads the table as of now; readTo is the last revision read from
// the change iterator.
func view[Obj any](t *requests[Obj], readTo statedb.Revision, now time.Time) tableView[Obj] {
	v := tableView[Obj]{reconciled: readTo, retryLow: ^statedb.Revision(0), oldestPicked: now}
	oldest := -1
	for i := range t.marks {
		m := &t.marks[i]
		if !m.tried {
			v.reconciled = min(v.reconciled, m.askedAt-1)
		}
		if oldest < 0 || m.askedAt < t.marks[oldest].askedAt {
			oldest = i
		}
		if m.pickedAt.Before(v.oldestPicked) {
			v.oldestPicked = m.pickedAt
		}
	}
	if oldest >= 0 {
		v.oldest = t.active[oldest]
	}
	finishView(t, &v)
	return v
}

// finishView completes v, whose walk of the active rows is done, with the
// retry heap's oldest row and the watermark it sets.
func finishView[Obj any](t *requests[Obj], v *tableView[Obj]) {
	if items := t.byAsk.Items; len(items) > 0 && (v.oldest == nil || items[0].askedAt < v.oldest.askedAt) {
		v.oldest = items[0]
	}
	if v.oldest != nil {
		v.retryLow = v.oldest.askedAt
	}
	v.retryLow = min(v.retryLow, v.reconciled+1)
}

// progressValues derives what the waits watch from the table.
func progressOf[Obj any](t *requests[Obj], v tableView[Obj]) progressValues {
	p := progressValues{reconciled: v.reconciled, retryLow: v.retryLow, outstanding: len(t.active) + t.byDue.Len()}
	if t.blocked > 0 {
		p.blocked = blockedError(t)
	}
	if p.outstanding > 0 && v.oldest != nil {
		o := v.oldest
		what := "queued"
		switch {
		case o.deleted && o.state == stRetrying:
			what = "delete waiting for a retry"
		case o.deleted:
			what = "delete in flight"
		case o.state == stRetrying:
			what = "waiting for a retry"
		case o.state == stRunning:
			what = "in flight"
		case o.state == stCommitting:
			what = "status being written"
		}
		p.oldest = oldestRequest{key: printableKey(o.key), what: what, err: o.err, attempts: o.attempts}
	}
	return p
}

// blockedError is the error the waits return while misconfiguration
// holds objects back.
func blockedError[Obj any](t *requests[Obj]) error {
	for _, r := range t.rows {
		if r.state == stHeld && r.why == whyMisconfigured {
			return fmt.Errorf("%w: %d object(s) cannot be reconciled, e.g. %s: %s",
				ErrInvalidConfig, t.blocked, printableKey(r.key), r.err)
		}
	}
	return nil
}

// firstErrors returns the failures of the smallest failing keys.
func firstErrors[Obj any](t *requests[Obj], n int) []error {
	return health.FirstErrors(n, func(yield func(key, err string) bool) {
		for k, r := range t.rows {
			if r.detail != nil && r.err != "" && !yield(k, r.err) {
				return
			}
		}
	})
}

// recentErrors lists h's recent failures, newest first.
func recentErrors(h *health.State) []ObjectError {
	list := h.Recent.List()
	out := make([]ObjectError, len(list))
	for i, f := range list {
		out[i] = ObjectError{Key: f.Key, Error: f.Err, At: f.At}
	}
	return out
}

// printableKey shows a primary key: as text when it is printable, else
// in hex.
func printableKey(k string) string { return health.PrintableKey(k) }

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
	queuedTask           func(seq uint64) bool
	// retryAt is when a retry due at the given time may go (the
	// breaker's pacing); breakerWhy says why, when the breaker is open.
	retryAt    func(due time.Time) time.Time
	breakerWhy string
	timeout    time.Duration // OperationTimeout (0: none)
}

// reportSignal is the channel Explanation.Changed hands out: made when an
// answer asks for it, closed at the loop's next report.
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

func fmtWorkers(running, concurrency int) string {
	return fmt.Sprintf("waiting for a worker: %d operation(s) running, Concurrency %d", running, concurrency)
}

func fmtRoom(outstanding, roundSize int) string {
	return fmt.Sprintf("waiting for room in a round: %d request(s) outstanding, RoundSize %d", outstanding, roundSize)
}

func fmtBreaker(err string) string {
	return fmt.Sprintf("breaker open: every attempt fails with %q; held retries go one at a time", err)
}

// explainKey answers Explain for key from the request table t, the
// table's current snapshot and the loop's parts p.
func explainKey[Obj comparable](r *reconciler[Obj], t *requests[Obj], key string, p explainParts, now time.Time) Explanation {
	e := Explanation{Reconciler: r.id.DisplayName(), Key: printableKey(key), ReadTo: p.readTo,
		Suspended: r.suspended(), Initialized: p.initialized, At: now}
	obj, rev, found := r.getByKey(r.db.ReadTxn(), key)
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
	case rev > p.readTo:
		e.State, e.Reason, e.Revision = KeyUnread, p.unreadWhy, rev
	case e.Status.Kind == StatusKindUnset:
		e.State, e.Reason = KeyUnset, "its status is Unset: it asks nothing of this reconciler"
	default:
		explainSettled(&e, row, r.cfg.RefreshInterval, p)
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
	case stBusy:
		e.State, e.Reason = KeyBusy, "waiting for an earlier attempt on the key to return"
		if row.stuck {
			e.Reason = "waiting for an earlier attempt on the key, past its timeout, to return"
		}
	case stRunning:
		if p.queuedTask != nil && p.queuedTask(row.taskSeq) {
			e.State, e.Reason = KeyQueued, p.queuedWhy
			break
		}
		e.State, e.Since, e.Reason = KeyRunning, row.startedAt, op+" in flight"
		if p.whole {
			e.Reason = "in the running Sync"
		}
		if p.timeout > 0 {
			e.Reason += fmt.Sprintf("; times out after %s", p.timeout)
		}
	case stCommitting:
		e.State, e.Reason = KeyCommitting, "its result is in; its status is being written"
	case stRetrying:
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
	case stHeld:
		e.State = KeyGivenUp
		e.Reason = map[reqWhy]string{whyMisconfigured: "given up on: a misconfiguration (see the error)",
			whyExhausted: "given up on: MaxRetries spent"}[row.why]
		if e.Reason == "" {
			e.Reason = "given up on: a Permanent error"
		}
	}
}

// explainLoop answers Explain (report.go's explainKey) with why work waits
// in this loop now.
func explainLoop[Obj comparable](l *loop[Obj], key string, now time.Time) Explanation {
	p := explainParts{
		readTo:      l.readTo,
		initialized: l.initialized,
		timeout:     l.cfg.OperationTimeout,
		retryAt:     l.commits.breaker.NextRetry,
		queuedTask:  l.exec.WaitsForWorker,
		unreadWhy:   "not read yet: the next round reads it",
		queuedWhy:   fmtWorkers(l.exec.Executing(), l.cfg.Concurrency),
	}
	switch {
	case l.suspended():
		p.unreadWhy, p.queuedWhy = "suspended: nothing is read or started until Resume", "suspended: nothing is started until Resume"
	case l.full.draining():
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

// explainSync answers Explain (report.go's explainKey) with why work waits
// in this loop now.
func explainSync[Obj comparable](s *syncLoop[Obj], key string, now time.Time) Explanation {
	p := explainParts{readTo: s.readTo, initialized: s.initialized, whole: true, timeout: s.cfg.OperationTimeout,
		retryAt:   s.commits.breaker.NextRetry,
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

package reconciler

import (
	"fmt"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	"github.com/converge-go/converge/reconciler/internal/clock"
	"github.com/converge-go/converge/reconciler/internal/health"
	"golang.org/x/time/rate"
)

// A report publishes, after a step, what the request table says: health,
// the status snapshot, the progress the waits watch and the gauges. Both
// loops report through publish; it walks the active rows once (about a
// round of them) and looks at the heads of the retry heaps (and in
// ordered mode of the ordering's): work proportional to a round, never to
// the table or a backlog.

// reportParts are what a loop adds to its request table in a report.
type reportParts struct {
	readTo      statedb.Revision // the last revision read from the change iterator
	initialized bool
	inFlight    int             // operations executing, not past their timeout (a running Sync counts one)
	stuck       int             // operations past their timeout that still run
	standby     bool            // a whole-set reconciler that does not lead: nothing is its work
	ownChanged  <-chan struct{} // the Ownership.Changed channel taken before the owned set was last looked at
	whole       health.Whole
	lastRound   RoundInfo
	lastFull    FullInfo
	prunedTo    statedb.Revision // the snapshot of the latest successful Prune or Sync
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
	if t.deps != nil && !p.standby {
		t.blockedHealth(&p.whole, h, p.healthTimer, now)
	}
	h.Report(hc, now, objects, r.suspended(), p.whole, p.healthTimer, failing)

	v := view(t, p.readTo, now)
	s := StatusSnapshot{Module: r.id.ModuleID, Name: r.cfg.Name, Table: r.cfg.Table.Name(), Suspended: r.suspended(),
		Initialized: p.initialized, RecentErrors: recentErrors(h), UpdatedAt: now,
		FailingDeletes: t.failingDeletes, Retries: t.byDue.Len(), Waiting: waiting(t), InFlight: p.inFlight, Stuck: p.stuck,
		Blocked:   t.n[stBlocked],
		LastRound: p.lastRound, LastFull: p.lastFull}
	if next, ok := t.nextDue(); ok {
		s.NextRetry = next
	}
	if waiting(t) > 0 {
		s.oldestSince = v.oldestPicked
	}
	pending, refreshing, errs, unowned, unset := t.kinds[StatusKindPending], t.kinds[StatusKindRefreshing],
		t.kinds[StatusKindError], t.n[stNotOwned], t.n[stUnset]
	s.Objects = ObjectCounts{Pending: pending, Refreshing: refreshing, Error: errs, Unowned: unowned, Unset: unset,
		Done: max(0, objects-pending-refreshing-errs-unowned-unset)}
	progress := progressOf(t, v)
	gauges := Gauges{Failing: t.failing, Waiting: waiting(t), InFlight: p.inFlight, Retries: t.byDue.Len(), Blocked: t.n[stBlocked],
		OldestWaiting: max(now.Sub(v.oldestPicked), 0)}
	progress.ownChanged, progress.prunedTo = p.ownChanged, p.prunedTo
	if p.standby {
		// Kept warm for a takeover, but no one's work here.
		s.Objects = ObjectCounts{Unowned: objects}
		s.FailingDeletes, s.Retries, s.NextRetry, s.Waiting, s.oldestSince = 0, 0, time.Time{}, 0, time.Time{}
		progress = progressValues{reconciled: p.readTo, retryLow: p.readTo + 1, ownChanged: p.ownChanged, prunedTo: p.prunedTo}
		gauges = Gauges{InFlight: p.inFlight}
	}
	// The snapshot before the progress, the progress before the gauges:
	// whoever a wait wakes sees a Status() at least as new as what it
	// waited for, and whoever the metrics wake sees the progress too.
	if t.order != nil && !p.standby {
		s.Ready = t.order.waits(now)
	}
	r.snapshot.store(&s)
	r.progress.set(progress)
	r.metrics.Gauges(gauges)
	if t.order != nil {
		r.metrics.ReadyWaits(s.Ready)
	}
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
	if t.order != nil {
		t.order.view(&v)
	}
	if t.deps != nil {
		t.deps.heaps.view(&v)
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
	p := progressValues{reconciled: v.reconciled, retryLow: v.retryLow, outstanding: waiting(t) + t.byDue.Len() + t.n[stBlocked]}
	if t.blocked > 0 {
		p.blocked = blockedError(t)
	}
	if p.outstanding > 0 && v.oldest != nil {
		o := v.oldest
		what := "queued"
		switch {
		case o.deleted && o.state == stRetrying:
			what = "delete waiting for a retry"
		case o.deleted && o.state == stBlocked:
			what = "delete waiting for its dependents' deletes"
		case o.deleted:
			what = "delete in flight"
		case o.state == stRetrying:
			what = "waiting for a retry"
		case o.state == stBlocked:
			what = "blocked on a dependency (Config.DependsOn or Config.Requires)"
		case o.state == stRunning:
			what = "in flight"
		case o.state == stCommitting:
			what = "status being written"
		}
		p.oldest = oldestRequest{key: printableKey(o.key), what: what, err: o.err, attempts: o.attempts, raw: o.key}
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
		for _, r := range t.failingRows {
			if !yield(r.key, r.err) {
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

// watchWrites has the loop's request table tell it of changes that kept a
// Done or Error status this reconciler did not write, where that is
// unambiguous: the Registry knows of no other reconciler on the table (one
// would write its own status beside ours, in a StatusSet), the change was
// made in this run (not restored from an earlier one), and the status was
// written in this run too (a status written by this reconciler: the
// writer copied the object from the table and changed it). A reconciler
// registered on the table after the run began turns it off for good.
func watchWrites[Obj comparable](r *reconciler[Obj], t *requests[Obj], fd *feed[Obj]) {
	if r.registry == nil || len(r.shared.others) > 0 {
		return
	}
	r.unreconciledLog = rate.NewLimiter(rate.Every(10*time.Second), 3)
	shared := false
	t.noticed = func(obj Obj, rev statedb.Revision, st Status) {
		if shared || rev <= fd.startRev || st.UpdatedAt.Before(fd.openedAt) {
			return
		}
		if shared = len(r.registry.others(r.regName, r.cfg.Table.Name())) > 0; shared {
			return // registered since the run began: its status writes keep ours
		}
		key := r.keyOf(obj)
		r.unreconciled.add(key, rev)
		r.metrics.UnreconciledWrite()
		if r.unreconciledLog.Allow() {
			r.log.Warn("An object was changed without StatusPending(): the change is not reconciled. "+
				"Write a changed object with StatusPending() (or StatusUnset() to keep it from the target).",
				"key", printableKey(key), "revision", rev, "status", st.Kind)
		}
	}
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

// waiting counts the rows that wait for a worker or are in its hands:
// active, and in ordered mode the Queued rows kept out of it.
func waiting[Obj any](t *requests[Obj]) int {
	if t.order != nil {
		return len(t.active) + t.n[stQueued]
	}
	return len(t.active)
}

// failingSet is the rows with an error, each at its failIdx: health names
// the first few without walking the table.
type failingSet[Obj any] []*request[Obj]

func (s *failingSet[Obj]) add(r *request[Obj]) {
	r.failIdx = len(*s)
	*s = append(*s, r)
}

func (s *failingSet[Obj]) remove(r *request[Obj]) {
	last := len(*s) - 1
	moved := (*s)[last]
	(*s)[r.failIdx], moved.failIdx = moved, r.failIdx
	(*s)[last] = nil
	*s = (*s)[:last]
}

// reportRealized hands one commit's realization latencies to the metrics
// and to the window Status() summarizes.
func reportRealized[Obj comparable](r *reconciler[Obj], latencies []time.Duration) {
	if len(latencies) == 0 {
		return
	}
	r.metrics.Realized(latencies)
	r.realized.add(latencies)
}

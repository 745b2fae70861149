package reconciler

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/clock"
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
	whole       wholeError
	lastRound   RoundInfo
	lastFull    FullInfo
	healthTimer *clock.Timer
}

func publish[Obj comparable](r *reconciler[Obj], t *requests[Obj], h *healthState, health cell.Health, now time.Time, p reportParts) {
	objects := r.cfg.Table.NumObjects(r.db.ReadTxn())
	h.dirty = h.dirty || t.dirty
	t.dirty = false
	failing := failingSet{n: t.failing, first: t.firstErrors}
	if p.standby {
		failing = failingSet{}
	}
	if r.shared.err != nil {
		p.whole = wholeError{op: "status", err: r.shared.err} // before any other: nothing is right while it holds
	}
	h.reportFailing(health, now, objects, r.suspended(), p.whole, p.healthTimer, failing)

	v := t.view(p.readTo, now)
	s := &StatusSnapshot{Module: r.id.ModuleID, Name: r.cfg.Name, Table: r.cfg.Table.Name(), Suspended: r.suspended(),
		Initialized: p.initialized, RecentErrors: h.recent.list(), UpdatedAt: now,
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
	progress := t.progressValues(v)
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
func (t *requests[Obj]) view(readTo statedb.Revision, now time.Time) tableView[Obj] {
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
	t.finishView(&v)
	return v
}

// finishView completes v, whose walk of the active rows is done, with the
// retry heap's oldest row and the watermark it sets.
func (t *requests[Obj]) finishView(v *tableView[Obj]) {
	if items := t.byAsk.Items; len(items) > 0 && (v.oldest == nil || items[0].askedAt < v.oldest.askedAt) {
		v.oldest = items[0]
	}
	if v.oldest != nil {
		v.retryLow = v.oldest.askedAt
	}
	v.retryLow = min(v.retryLow, v.reconciled+1)
}

// progressValues derives what the waits watch from the table.
func (t *requests[Obj]) progressValues(v tableView[Obj]) progressValues {
	p := progressValues{reconciled: v.reconciled, retryLow: v.retryLow, outstanding: len(t.active) + t.byDue.Len()}
	if t.blocked > 0 {
		p.blocked = t.blockedError()
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
func (t *requests[Obj]) blockedError() error {
	for _, r := range t.rows {
		if r.state == stHeld && r.why == whyMisconfigured {
			return fmt.Errorf("%w: %d object(s) cannot be reconciled, e.g. %s: %s",
				ErrInvalidConfig, t.blocked, printableKey(r.key), r.err)
		}
	}
	return nil
}

// firstErrors returns the failures of the smallest failing keys.
func (t *requests[Obj]) firstErrors(n int) []error {
	return firstErrors(n, func(yield func(key, err string) bool) {
		for k, r := range t.rows {
			if r.detail != nil && r.err != "" && !yield(k, r.err) {
				return
			}
		}
	})
}

// maxHealthErrors bounds the errors joined into the Degraded health
// report; maxRecentErrors those Status() lists.
const (
	maxHealthErrors = 10
	maxRecentErrors = 16
)

// healthState is what was last reported in health, and the recent errors.
type healthState struct {
	dirty         bool      // the failing set changed since the last report
	last          string    // the last health message, to skip repeats
	lastCount     int       // the object count and suspension in last, when it
	lastSuspended bool      // is an OK or Suspended message: a report that
	lastPlain     bool      // would repeat it costs no formatting
	lastDegraded  time.Time // when the last Degraded report was built
	recent        recentErrors
}

func newHealthState() healthState { return healthState{dirty: true} }

// recentErrors keeps the last few failures, newest last. Keys are made
// printable only when listed: failures can come by the hundred thousand.
type recentErrors struct {
	buf  [maxRecentErrors]recentError
	next int
	n    int
}

type recentError struct {
	key, err string
	at       time.Time
}

func (r *recentErrors) add(e recentError) {
	r.buf[r.next] = e
	r.next = (r.next + 1) % maxRecentErrors
	r.n = min(r.n+1, maxRecentErrors)
}

// list returns the recent errors, newest first.
func (r *recentErrors) list() []ObjectError {
	out := make([]ObjectError, 0, r.n)
	for i := 1; i <= r.n; i++ {
		e := r.buf[(r.next-i+maxRecentErrors)%maxRecentErrors]
		out = append(out, ObjectError{Key: printableKey(e.key), Error: e.err, At: e.at})
	}
	return out
}

// firstErrors returns the failures of the smallest keys of failing, at
// most n, in key order.
func firstErrors(n int, failing iter.Seq2[string, string]) []error {
	keys := make([]string, 0, n+1)
	msgs := map[string]string{}
	for k, msg := range failing {
		if len(keys) == n && k >= keys[n-1] {
			continue
		}
		i, _ := slices.BinarySearch(keys, k)
		keys = slices.Insert(keys, i, k)
		msgs[k] = msg
		if len(keys) > n {
			delete(msgs, keys[n])
			keys = keys[:n]
		}
	}
	errs := make([]error, len(keys))
	for i, k := range keys {
		errs[i] = fmt.Errorf("%s: %s", printableKey(k), msgs[k])
	}
	return errs
}

// printableKey shows a primary key: as text when it is printable, else
// in hex.
func printableKey(k string) string {
	for _, r := range k {
		if r < 0x20 || r > 0x7e {
			return fmt.Sprintf("%x", k)
		}
	}
	return k
}

// While many objects fail, a changed Degraded report is rebuilt at most
// every healthRecomputeEvery: building it walks the failing set, and a
// retry storm of 100,000 objects changes that set every round.
const (
	healthRecomputeEvery = time.Second
	healthCheapFailing   = 1000 // below this, rebuild at once
)

// wholeError is an error of the whole target rather than of one object:
// the last prune's, or the last Sync's.
type wholeError struct {
	op  string // "prune", "sync", "status"
	err error
}

// failingSet is what a health report needs of the failing objects: how
// many, and the first n of them by key, with their errors.
type failingSet struct {
	n     int
	first func(n int) []error
}

// reportFailing publishes health: Degraded with the first errors while
// objects fail or the whole target does, else OK (or Suspended) with the
// count. While many objects fail, a changed Degraded report is rebuilt at
// most every healthRecomputeEvery: later fires when it is due.
func (h *healthState) reportFailing(health cell.Health, now time.Time, objects int, suspended bool, whole wholeError, later *clock.Timer, failing failingSet) {
	if failing.n > 0 || whole.err != nil {
		wasDegraded := strings.HasPrefix(h.last, "Degraded")
		if wasDegraded && h.dirty && failing.n > healthCheapFailing {
			if at := h.lastDegraded.Add(healthRecomputeEvery); at.After(now) {
				later.ArmAt(at) // report the change a little later
				return
			}
		}
		if h.dirty || !wasDegraded {
			h.lastPlain, h.lastDegraded, h.dirty = false, now, false
			var errs []error
			if failing.first != nil {
				errs = failing.first(maxHealthErrors)
			}
			if whole.err != nil {
				errs = append([]error{fmt.Errorf("%s: %w", whole.op, whole.err)}, errs...)
			}
			if more := failing.n - min(failing.n, maxHealthErrors); more > 0 {
				errs = append(errs, fmt.Errorf("and %d more", more))
			}
			msg := fmt.Sprintf("Degraded: %d object(s) failing", failing.n)
			if whole.err != nil {
				msg += ", " + whole.op + " failed"
			}
			h.last = msg
			health.Degraded(msg[len("Degraded: "):], errors.Join(errs...))
		}
		return
	}
	if h.lastPlain && objects == h.lastCount && suspended == h.lastSuspended {
		h.dirty = false
		return
	}
	msg := fmt.Sprintf("OK, %d object(s)", objects)
	if suspended {
		msg = fmt.Sprintf("Suspended, %d object(s)", objects)
	}
	h.dirty = false
	h.lastPlain, h.lastCount, h.lastSuspended = true, objects, suspended
	if msg != h.last {
		h.last = msg
		health.OK(msg)
	}
}

package reconciler

import (
	"iter"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/heap"
	"github.com/converge-go/converge/reconciler/internal/revs"
)

// The request table: one row per key the reconciler has something to say
// about, in exactly one named state, with why and since when. Only the
// loop goroutine touches it. Everything reported (the waits' progress,
// Status(), health, the gauges, Explain) is derived from it, and every
// other structure below is kept by the transitions in this file:
//
//	state        detail  active  ready  retry heaps  refresh heap  counted
//	Queued       yes     yes     yes*   -            -             yes
//	Busy         yes     yes     -      -            -             yes
//	Running      yes     yes     -      -            -             yes
//	Committing   yes     yes     -      -            -             yes
//	Retrying     yes     -       -      yes          -             yes
//	Held         yes     -       -      -            yes**         yes
//	RefreshDue   yes     -       -      -            yes           -
//	NotOwned     -       -       -      -            -             -
//	Unset        -       -       -      -            -             -
//	Draining     -       -       -      -            -             -
//
//	*  per-object loop only: a whole-set loop takes every row into a Sync.
//	** when refresh is on: it comes back to a given-up object.
//
// "Counted" rows are live objects' outstanding work, counted by the kind
// Status() reports. Rules between the fields:
//
//   - running != 0 while an attempt on the key still executes (the key is
//     busy): no other attempt on it starts. It outlives the request that
//     started it: a newer request waits in Busy, a settled one in Draining
//     (forgotten when the attempt returns), and NotOwned and Unset rows
//     keep it too.
//   - Busy holds exactly the rows that would be Queued but for running.
//   - Running and Committing rows carry the awaited attempt's id
//     (attempt); a result with another id is not theirs.
//   - A row without a detail keeps only its key, askedAt (NotOwned: the
//     lowest revision a change of it may have been made at while another
//     replica owned it) and running.

// reqState is where a row stands.
type reqState uint8

const (
	stQueued     reqState = iota // read; waits for a worker (whole set: the next Sync)
	stBusy                       // queued behind an earlier attempt on its key
	stRunning                    // an attempt is out
	stCommitting                 // its result is judged; its status write is out on the committer
	stRetrying                   // waits for its retry at due
	stHeld                       // given up on until the object changes or refresh comes at due
	stRefreshDue                 // Done, its refresh put off: marked Refreshing at due
	stNotOwned                   // another replica owns the key
	stUnset                      // the object is Unset: it asks nothing
	stDraining                   // settled; kept while an attempt on the key still runs
	reqStateCount
)

// reqWhy says why a Retrying or Held row is there.
type reqWhy uint8

const (
	whyNone          reqWhy = iota
	whyBackoff              // failed: the backoff
	whyRetryAfter           // failed: the delay the operation asked for
	whyDeferred             // RetryAfter(d, nil): not ready, not a failure
	whyOwed                 // its write found a status it did not expect: run again at once
	whyPermanent            // a Permanent error
	whyExhausted            // MaxRetries spent
	whyMisconfigured        // a misconfiguration: the waits report it
)

// request is one row.
type request[Obj any] struct {
	key     string
	state   reqState
	why     reqWhy
	stuck   bool   // the attempt in running passed its timeout
	gen     uint32 // counts the row's queuings and reuses: ready entries go stale
	askedAt statedb.Revision
	running uint64
	*detail[Obj]
}

// detail is what a row with work to do carries.
type detail[Obj any] struct {
	obj     Obj              // the object as last read (a delete: the deleted object)
	rev     statedb.Revision // obj's revision
	deleted bool
	// asked is the status that asked for the work (a retry hands Update
	// the object with it); expect is this reconciler's status in the table
	// as far as the loop knows: asked, or the Error it wrote since. A
	// result is written only while the table still holds expect.
	asked, expect Status
	attempts      int  // consecutive failures
	tried         bool // attempted at least once: its change counts as attempted
	err           string
	errAt         time.Time // failing since
	since         time.Time // in its state since
	due           time.Time // Retrying: the retry; Held, RefreshDue: the refresh
	requestedAt   time.Time // when the change being realized was written
	pickedAt      time.Time // when last queued: Status's oldest waiting
	startedAt     time.Time // when its latest attempt started
	// attempt is the awaited attempt's id; writing, in Committing, that of
	// the attempt whose status write is out; taskSeq the executor's number
	// of its latest task.
	attempt, writing, taskSeq uint64
	loggedErr                 string // the failure last logged, and when
	loggedAt                  time.Time
	// Positions in the retry heaps, the refresh heap and active.
	dueIdx, askIdx, refreshIdx, activeIdx int
}

// activeMark is what a report reads of an active row, at the same index
// in marks as the row in active: a report walks all of them, and one
// slice is read without a cache miss per row.
type activeMark struct {
	askedAt  statedb.Revision
	pickedAt time.Time
	tried    bool
}

// readyEntry is a Queued row as it was when queued.
type readyEntry[Obj any] struct {
	r   *request[Obj]
	gen uint32
}

// requests is the table.
type requests[Obj any] struct {
	rows map[string]*request[Obj]

	active []*request[Obj] // Queued, Busy, Running and Committing rows
	marks  []activeMark
	ready  []readyEntry[Obj] // Queued rows in arrival order (dispatch only)
	byDue  heap.Indexed[*request[Obj]]
	byAsk  heap.Indexed[*request[Obj]] // Retrying rows by askedAt: the retry low watermark
	// refreshQ holds Held and RefreshDue rows by when refresh comes.
	refreshQ heap.Indexed[*request[Obj]]

	n              [reqStateCount]int
	kinds          [statusKindCount]int // counted rows by expect's kind (Error when failing)
	deferred       int                  // Retrying for whyDeferred
	blocked        int                  // Held for whyMisconfigured
	failing        int                  // rows with an error, deletes included
	failingDeletes int
	executing      int // rows with running != 0
	dirty          bool
	lastAttempt    uint64

	free     []*request[Obj]
	freeDets []*detail[Obj]
	dispatch bool // per-object: the workers take the ready rows

	// How to read an object: its primary key, this reconciler's status,
	// and a hook that sees every status read (the shared-status check).
	keyOf    func(Obj) string
	statusOf func(Obj) Status
	check    func(Obj, Status)
	// owns says whether this replica owns a key (nil: every key).
	owns func(string) bool
}

func newRequests[Obj any](dispatch bool, keyOf func(Obj) string, statusOf func(Obj) Status, check func(Obj, Status)) *requests[Obj] {
	t := &requests[Obj]{rows: map[string]*request[Obj]{}, dispatch: dispatch, keyOf: keyOf, statusOf: statusOf, check: check}
	t.byDue.Less = func(a, b *request[Obj]) bool { return a.due.Before(b.due) }
	t.byDue.Index = func(r *request[Obj]) *int { return &r.dueIdx }
	t.byAsk.Less = func(a, b *request[Obj]) bool { return a.askedAt < b.askedAt }
	t.byAsk.Index = func(r *request[Obj]) *int { return &r.askIdx }
	t.refreshQ.Less = t.byDue.Less
	t.refreshQ.Index = func(r *request[Obj]) *int { return &r.refreshIdx }
	return t
}

// counted reports whether r counts as a live object's outstanding work.
func (r *request[Obj]) counted() bool {
	return r.detail != nil && !r.deleted && r.state != stRefreshDue
}

// enter puts r into state s (its fields already set for it) and into what
// s puts a row in.
func (t *requests[Obj]) enter(r *request[Obj], s reqState, why reqWhy, now time.Time) {
	r.state, r.why = s, why
	if r.detail != nil {
		r.since = now
	}
	switch s {
	case stQueued, stBusy, stRunning, stCommitting:
		r.activeIdx = len(t.active)
		t.active = append(t.active, r)
		t.marks = append(t.marks, activeMark{askedAt: r.askedAt, pickedAt: r.pickedAt, tried: r.tried})
		if s == stQueued && t.dispatch {
			r.gen++
			t.ready = append(t.ready, readyEntry[Obj]{r, r.gen})
		}
	case stRetrying:
		t.byDue.Push(r)
		t.byAsk.Push(r)
	case stHeld, stRefreshDue:
		if !r.due.IsZero() {
			t.refreshQ.Push(r)
		}
	}
	t.n[s]++
	t.deferred += b2i(why == whyDeferred)
	t.blocked += b2i(why == whyMisconfigured)
	t.count(r, +1)
	t.dirty = true
}

// leave takes r out of its state.
func (t *requests[Obj]) leave(r *request[Obj]) {
	switch r.state {
	case stQueued, stBusy, stRunning, stCommitting:
		last := len(t.active) - 1
		moved := t.active[last]
		t.active[r.activeIdx], moved.activeIdx = moved, r.activeIdx
		t.marks[r.activeIdx] = t.marks[last]
		t.active[last] = nil
		t.active, t.marks = t.active[:last], t.marks[:last]
		if r.state == stCommitting {
			r.writing = 0
		}
	case stRetrying:
		t.byDue.Remove(r.dueIdx)
		t.byAsk.Remove(r.askIdx)
	case stHeld, stRefreshDue:
		if !r.due.IsZero() {
			t.refreshQ.Remove(r.refreshIdx)
		}
	}
	t.n[r.state]--
	t.deferred -= b2i(r.why == whyDeferred)
	t.blocked -= b2i(r.why == whyMisconfigured)
	t.count(r, -1)
	t.dirty = true
}

// count adds d to what r counts for: its kind as Status reports it (a
// failing object is Error even when its status could not be written) and
// the failing counts.
func (t *requests[Obj]) count(r *request[Obj], d int) {
	if r.detail == nil {
		return
	}
	if r.err != "" {
		t.failing += d
		t.failingDeletes += d * b2i(r.deleted)
	}
	if !r.counted() {
		return
	}
	kind := r.expect.Kind
	if r.err != "" {
		kind = StatusKindError
	}
	if !kind.Valid() {
		kind = StatusKindPending
	}
	t.kinds[kind] += d
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// move takes r from its state into s, keeping its error (errMsg ""
// clears it); a failure keeps the time it began. due is when a Retrying
// row's retry, or a Held or RefreshDue row's refresh, is due.
func (t *requests[Obj]) move(r *request[Obj], s reqState, why reqWhy, errMsg string, due, now time.Time) {
	t.leave(r)
	if errMsg != "" && r.err == "" {
		r.errAt = now
	}
	r.err, r.due = errMsg, due
	t.enter(r, s, why, now)
}

// row returns key's row, making an empty one (in no state) if there is
// none.
func (t *requests[Obj]) row(key string) *request[Obj] {
	if r := t.rows[key]; r != nil {
		return r
	}
	var r *request[Obj]
	if n := len(t.free); n > 0 {
		r, t.free = t.free[n-1], t.free[:n-1]
	} else {
		r = new(request[Obj])
	}
	r.key, r.state = key, reqStateCount
	t.rows[key] = r
	return r
}

// strip takes r out of its state and drops its detail: it is to be
// NotOwned, Unset or Draining, or forgotten.
func (t *requests[Obj]) strip(r *request[Obj]) {
	if r.state != reqStateCount {
		t.leave(r)
	}
	if r.detail != nil {
		if len(t.freeDets) < 4096 {
			*r.detail = detail[Obj]{}
			t.freeDets = append(t.freeDets, r.detail)
		}
		r.detail = nil
	}
	r.state, r.why = reqStateCount, whyNone
}

// bare puts r, stripped, into NotOwned, Unset, or (with no state wanted)
// Draining while its attempt runs, else forgets it.
func (t *requests[Obj]) bare(r *request[Obj], s reqState) {
	t.strip(r)
	if s == reqStateCount && r.running != 0 {
		s = stDraining
	}
	if s != reqStateCount {
		t.enter(r, s, whyNone, time.Time{})
		return
	}
	delete(t.rows, r.key)
	if len(t.free) < 4096 {
		*r = request[Obj]{gen: r.gen + 1}
		t.free = append(t.free, r)
	}
	t.dirty = true
}

// settle forgets r's work: nothing is outstanding for its key.
func (t *requests[Obj]) settle(r *request[Obj]) { t.bare(r, reqStateCount) }

// add makes a new request for key, replacing whatever its row held:
// retries follow the object, not the revision. An attempt still executing
// keeps the key busy; its result will not be wanted.
func (t *requests[Obj]) add(key string, ch change[Obj], st Status, askedAt statedb.Revision, now time.Time) *request[Obj] {
	r := t.row(key)
	var logged string
	var loggedAt time.Time
	if r.detail != nil {
		logged, loggedAt = r.loggedErr, r.loggedAt
	}
	t.strip(r)
	if n := len(t.freeDets); n > 0 {
		r.detail, t.freeDets = t.freeDets[n-1], t.freeDets[:n-1]
	} else {
		r.detail = new(detail[Obj])
	}
	*r.detail = detail[Obj]{obj: ch.obj, rev: ch.rev, deleted: ch.deleted, asked: st, expect: st,
		pickedAt: now, loggedErr: logged, loggedAt: loggedAt}
	if !ch.deleted && st.Kind == StatusKindPending {
		r.requestedAt = st.UpdatedAt
	}
	r.askedAt = askedAt
	t.enter(r, t.queuedState(r), whyNone, now)
	return r
}

// queuedState is Queued, or Busy while an attempt on r's key still runs.
func (t *requests[Obj]) queuedState(r *request[Obj]) reqState {
	if r.running != 0 {
		return stBusy
	}
	return stQueued
}

// retry schedules r's next attempt at due.
func (t *requests[Obj]) retry(r *request[Obj], due time.Time, why reqWhy, errMsg string, now time.Time) {
	t.move(r, stRetrying, why, errMsg, due, now)
}

// hold gives up on r until its object changes, or until refreshAt (zero:
// never) when refresh tries it again. It stays failing.
func (t *requests[Obj]) hold(r *request[Obj], why reqWhy, errMsg string, refreshAt, now time.Time) {
	t.move(r, stHeld, why, errMsg, refreshAt, now)
}

// requeue puts r back into the queue: its retry came due, or it is to run
// again at once.
func (t *requests[Obj]) requeue(r *request[Obj], now time.Time) {
	r.pickedAt = now
	t.move(r, t.queuedState(r), whyNone, r.err, time.Time{}, now)
}

// setExpect records that the table holds st as this reconciler's status
// of r's object.
func (t *requests[Obj]) setExpect(r *request[Obj], st Status) {
	t.count(r, -1)
	r.expect = st
	t.count(r, +1)
	t.dirty = true
}

// setTried records that r's change has been attempted: its result is in.
func (t *requests[Obj]) setTried(r *request[Obj]) {
	r.tried = true
	switch r.state {
	case stQueued, stBusy, stRunning, stCommitting:
		t.marks[r.activeIdx].tried = true
	}
}

// take returns the Queued rows in arrival order, each now Running under
// a new attempt id.
func (t *requests[Obj]) take(buf []*request[Obj], now time.Time) []*request[Obj] {
	buf = buf[:0]
	for _, e := range t.ready {
		r := e.r // replaced, settled or queued again since, if gen moved
		if r.gen != e.gen || r.state != stQueued {
			continue
		}
		t.lastAttempt++
		r.attempt, r.running = t.lastAttempt, t.lastAttempt
		t.executing++
		r.startedAt = now
		t.move(r, stRunning, whyNone, r.err, time.Time{}, now)
		buf = append(buf, r)
	}
	clear(t.ready)
	t.ready = t.ready[:0]
	return buf
}

// returned records that attempt id on r's key stopped executing, and
// reports whether its result is still wanted.
func (t *requests[Obj]) returned(r *request[Obj], id uint64) bool {
	if id != 0 && r.running == id {
		r.running, r.stuck = 0, false
		t.executing--
		switch r.state {
		case stBusy:
			t.move(r, stQueued, whyNone, r.err, time.Time{}, r.since) // its key is free now
		case stDraining:
			t.settle(r)
			return false
		}
	}
	if r.detail == nil || r.attempt != id {
		return false
	}
	r.attempt = 0
	return true
}

// overdue records that attempt id ran past its timeout: its result is
// given up on now, though it still runs. It reports whether the result
// was r's (the caller records the failure).
func (t *requests[Obj]) overdue(r *request[Obj], id uint64) bool {
	if id != 0 && r.running == id {
		r.stuck = true
	}
	if r.detail == nil || r.attempt != id {
		return false
	}
	r.attempt = 0
	return true
}

// writeOut records that r's result, of attempt id, is judged and its
// status write is out on the committer: it no longer takes room.
func (t *requests[Obj]) writeOut(r *request[Obj], id uint64, now time.Time) {
	t.move(r, stCommitting, whyNone, r.err, time.Time{}, now)
	r.writing = id
}

// writeBack reports whether the status write of attempt id, back from the
// committer, is still r's: r was neither replaced nor settled meanwhile.
func (t *requests[Obj]) writeBack(r *request[Obj], id uint64) bool {
	return r.state == stCommitting && r.writing == id
}

// popDue returns the earliest retry if it is due at now.
func (t *requests[Obj]) popDue(now time.Time) (*request[Obj], bool) {
	if t.byDue.Len() == 0 || t.byDue.Items[0].due.After(now) {
		return nil, false
	}
	return t.byDue.Items[0], true
}

// nextDue is when the earliest retry is due.
func (t *requests[Obj]) nextDue() (time.Time, bool) {
	if t.byDue.Len() == 0 {
		return time.Time{}, false
	}
	return t.byDue.Items[0].due, true
}

// popRefresh returns the earliest Held or RefreshDue row refresh is due
// for at now; nextRefresh is when the earliest is due.
func (t *requests[Obj]) popRefresh(now time.Time) (*request[Obj], bool) {
	if t.refreshQ.Len() == 0 || t.refreshQ.Items[0].due.After(now) {
		return nil, false
	}
	return t.refreshQ.Items[0], true
}

func (t *requests[Obj]) nextRefresh() (time.Time, bool) {
	if t.refreshQ.Len() == 0 {
		return time.Time{}, false
	}
	return t.refreshQ.Items[0].due, true
}

// refreshLater keeps key, whose object (ch) was due for refresh but could
// not be marked now, due again at due: a key skipped is never lost.
func (t *requests[Obj]) refreshLater(key string, ch change[Obj], due, now time.Time) {
	r := t.rows[key]
	switch {
	case r != nil && r.state == stHeld:
		t.move(r, stHeld, r.why, r.err, due, now)
	case r != nil && r.state != stDraining:
		// Its row brings it back.
	default:
		r = t.add(key, ch, t.statusOf(ch.obj), ch.rev, now) // expects the status it was found due in
		t.move(r, stRefreshDue, whyNone, "", due, now)
	}
}

// unschedule takes r, whose refresh is due now, out of the refresh queue:
// a Held row stays given up on until the change refresh writes replaces
// it; a RefreshDue row is done with.
func (t *requests[Obj]) unschedule(r *request[Obj], now time.Time) {
	if r.state == stRefreshDue {
		t.settle(r)
		return
	}
	t.move(r, stHeld, r.why, r.err, time.Time{}, now)
}

// lose records that this replica does not own key (any more): its work is
// dropped (an attempt still executing keeps the key busy, its result not
// wanted); a live key is NotOwned from askedAt on, a deleted one
// forgotten, its delete being the owner's work.
func (t *requests[Obj]) lose(key string, deleted bool, askedAt statedb.Revision) {
	r := t.rows[key]
	switch {
	case r == nil && deleted:
		return
	case r == nil:
		r = t.row(key)
	case r.state == stNotOwned && !deleted:
		r.askedAt = min(r.askedAt, askedAt)
		return
	}
	if deleted {
		t.settle(r)
		return
	}
	t.bare(r, stNotOwned)
	r.askedAt = askedAt
}

// readOwned is read with Config.Ownership: a change of a key not owned is
// dropped (lose), a change of a key gained makes its request (gain), any
// other is read as usual.
func (t *requests[Obj]) readOwned(ch change[Obj], own *revs.Ranges, askedAt, startRev statedb.Revision, now time.Time) bool {
	key := t.keyOf(ch.obj)
	if !t.owns(key) {
		t.lose(key, ch.deleted, askedAt)
		return false
	}
	if at, ok := t.gained(key); ok {
		// Owned again, and read before Changed is: gained here, as reown
		// would, with this newer change.
		return t.gain(key, ch, min(at, askedAt), now)
	}
	return t.readChange(ch, own, askedAt, startRev, now)
}

// reown looks at every row and every object of all again when the owned
// set changed: a walk of the table, but ownership changes are rare, and
// an object Done here that another replica now owns must leave the counts.
func (t *requests[Obj]) reown(all iter.Seq2[Obj, statedb.Revision], now time.Time) {
	for key, r := range t.rows {
		if r.detail != nil && !t.owns(key) {
			t.lose(key, r.deleted, r.askedAt)
		}
	}
	for obj, rev := range all {
		key := t.keyOf(obj)
		if !t.owns(key) {
			t.lose(key, false, rev)
		} else if at, ok := t.gained(key); ok {
			t.gain(key, change[Obj]{obj: obj, rev: rev}, min(at, rev), now)
		}
	}
	t.dirty = true
}

// gain makes a request of a key that is owned now, from its latest
// change, whatever its status but Unset (it asks nothing): a delete, a
// Pending or Refreshing object, an object whose last attempt failed
// (retried at once), or one Done before (applied again: the owner
// meanwhile may have changed the target). askedAt is where the waits
// count it from. It reports whether it queued a request for the next
// round (a retry is due at once instead).
func (t *requests[Obj]) gain(key string, ch change[Obj], askedAt statedb.Revision, now time.Time) bool {
	if ch.deleted {
		t.add(key, ch, Status{}, askedAt, now)
		return true
	}
	st := t.statusOf(ch.obj)
	switch {
	case st.Kind == StatusKindUnset:
		t.unset(key, true)
		return false // asks nothing, here as on any other replica
	case st.IsPendingOrRefreshing() || !st.Kind.Valid():
		t.add(key, ch, st, askedAt, now)
	case st.Kind == StatusKindError:
		t.retryError(key, ch, st, askedAt, now)
		return false
	default:
		// Applied again, as a refresh; the write expects the Done read.
		r := t.add(key, ch, Status{Kind: StatusKindRefreshing, UpdatedAt: st.UpdatedAt}, askedAt, now)
		t.setExpect(r, st)
	}
	return true
}

// gained reports whether key was NotOwned, and since which revision; its
// row is then the caller's to fill (add, retryError, unset).
func (t *requests[Obj]) gained(key string) (statedb.Revision, bool) {
	r := t.rows[key]
	if r == nil || r.state != stNotOwned {
		return 0, false
	}
	at := r.askedAt
	t.settle(r)
	return at, true
}

// unset records whether key's live object is Unset. An Unset object asks
// nothing: whatever its key had outstanding is withdrawn, and an attempt
// still running has its result discarded.
func (t *requests[Obj]) unset(key string, unset bool) {
	r := t.rows[key]
	switch {
	case unset && (r == nil || r.state != stUnset):
		t.bare(t.row(key), stUnset)
	case !unset && r != nil && r.state == stUnset:
		t.settle(r)
	}
}

// read decides what one change asks of this reconciler, for both loops,
// and reports whether it queued a request. A delete always asks; a Done of
// the reconciler's own writing (own), or any status write while nothing
// is outstanding, is a settled request's echo and asks nothing, read
// without computing its key; anything else goes by decide.
func (t *requests[Obj]) read(ch change[Obj], own *revs.Ranges, askedAt, startRev statedb.Revision, now time.Time) bool {
	if t.owns != nil {
		return t.readOwned(ch, own, askedAt, startRev, now)
	}
	return t.readChange(ch, own, askedAt, startRev, now)
}

// readChange is read for a key owned here.
func (t *requests[Obj]) readChange(ch change[Obj], own *revs.Ranges, askedAt, startRev statedb.Revision, now time.Time) bool {
	if ch.deleted {
		key := t.keyOf(ch.obj)
		t.unset(key, false)
		t.add(key, ch, Status{}, askedAt, now)
		return true
	}
	st := t.statusOf(ch.obj)
	t.check(ch.obj, st)
	// (An own write is never of an Unset key: it lands only while the
	// object holds the status the request read.)
	if st.Kind == StatusKindDone && (len(t.rows) == 0 || own.Has(ch.rev)) {
		return false
	}
	return t.decide(t.keyOf(ch.obj), ch, st, askedAt, startRev, now)
}

// decide makes a request of a live object's change if it asks this
// reconciler for work, and reports whether it queued one. st is this
// reconciler's status in ch.obj.
func (t *requests[Obj]) decide(key string, ch change[Obj], st Status, askedAt, startRev statedb.Revision, now time.Time) bool {
	t.unset(key, st.Kind == StatusKindUnset)
	r := t.rows[key]
	live := r != nil && r.detail != nil && !r.deleted && r.state != stRefreshDue
	switch {
	case st.Kind == StatusKindUnset:
		return false // withdrawn (unset above)
	case st.IsPendingOrRefreshing() || !st.Kind.Valid():
		if live && sameRequest(r.asked, st) {
			// The request we have, seen again in a newer revision:
			// another reconciler's status write on a shared object, or
			// another writer putting back a copy of the object from
			// before our last status write. The result is written over
			// what asked again.
			r.obj, r.rev = ch.obj, ch.rev
			if !sameStatus(r.expect, st) {
				t.setExpect(r, st)
			}
			return false
		}
		t.add(key, ch, st, askedAt, now)
		return true
	case live && sameStatus(r.expect, st):
		// A status write that leaves ours as we know it (our own, or
		// another reconciler's on a shared object): follow the revision.
		r.obj, r.rev = ch.obj, ch.rev
	case r == nil && st.Kind == StatusKindError && ch.rev <= startRev:
		// Failed in an earlier run, whose retries are gone: retried at
		// once, not queued by this change.
		t.retryError(key, ch, st, askedAt, now)
	}
	// Otherwise a status write that asks nothing of us: a Done or Error of
	// ours read back after a newer one, or another writer's.
	return false
}

// retryError makes a request of an object whose last attempt failed where
// no retry is kept for it (an earlier run, or another replica's): it is
// retried at once, as if it had just failed.
func (t *requests[Obj]) retryError(key string, ch change[Obj], st Status, askedAt statedb.Revision, now time.Time) {
	r := t.add(key, ch, Status{Kind: StatusKindPending, UpdatedAt: st.UpdatedAt}, askedAt, now)
	t.setExpect(r, st)
	r.attempts = 1
	t.setTried(r)
	t.retry(r, now, whyBackoff, st.Error, now)
}

// sameRequest reports whether st is the very request asked: a pending
// status with the same ID. A status without an ID (built by hand) is never
// taken for an older one: each revision carrying it is a request of its own.
func sameRequest(asked, st Status) bool {
	return st.ID != 0 && st.ID == asked.ID && st.Kind == asked.Kind
}

// sameStatus reports whether two statuses are the same write. A request
// without an ID is like no other, itself in a later revision included: a
// writer that sets a bare Pending again may have changed the data.
func sameStatus(a, b Status) bool {
	if a.ID == 0 && a.IsPendingOrRefreshing() {
		return false
	}
	return a.Kind == b.Kind && a.ID == b.ID && a.Error == b.Error && a.UpdatedAt.Equal(b.UpdatedAt)
}

// takeAll hands every row with work to one Sync, under a new attempt id:
// Queued and Retrying rows run, Held ones stay Held (given up on, but
// their change is in the Sync all the same). A row replaced while the
// Sync runs loses the id: the Sync's result is not its.
func (t *requests[Obj]) takeAll(buf []*request[Obj], now time.Time) ([]*request[Obj], uint64) {
	t.lastAttempt++
	id := t.lastAttempt
	for _, r := range t.rows {
		if r.detail == nil {
			continue
		}
		r.attempt = id
		if r.state == stQueued || r.state == stRetrying {
			if r.tried {
				r.pickedAt = now
			}
			r.startedAt = now
			t.move(r, stRunning, whyNone, r.err, time.Time{}, now)
		}
		buf = append(buf, r)
	}
	return buf, id
}

// syncResult reports whether r's result is that of Sync id, and takes it.
func (t *requests[Obj]) syncResult(r *request[Obj], id uint64) bool {
	if r.detail == nil || r.attempt != id {
		return false
	}
	r.attempt = 0
	return true
}

// untake queues r again as it was: the Sync it was in did not run for it
// (this replica stopped leading).
func (t *requests[Obj]) untake(r *request[Obj]) {
	if r.state == stRunning {
		t.move(r, t.queuedState(r), whyNone, r.err, time.Time{}, r.since)
	}
}

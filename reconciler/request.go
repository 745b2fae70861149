package reconciler

import (
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/heap"
)

// The request table: one row per key the reconciler has something to say
// about, in exactly one named state, with why and since when. Only the
// loop goroutine touches it. Everything reported (the waits' progress,
// Status(), health, the gauges, Explain) is derived from it. This file is
// its structure: the fields and the rules between them, and the
// bookkeeping that keeps every derived structure right (enter and leave,
// which every state change goes through; setExpect and setTried, for the
// fields the counts and marks follow). The transitions, each named for
// what happened to a key, are in table.go.
//
//	state        detail  active  ready  retry heaps  refresh heap  counted
//	Queued       yes     yes***  yes*   -            -             yes
//	Busy         yes     yes     -      -            -             yes
//	Running      yes     yes     -      -            -             yes
//	Committing   yes     yes     -      -            -             yes
//	Blocked      yes     -       -      -            -             yes****
//	Retrying     yes     -       -      yes          -             yes
//	Held         yes     -       -      -            yes**         yes
//	RefreshDue   yes     -       -      -            yes           -
//	NotOwned     -       -       -      -            -             -
//	Unset        -       -       -      -            -             -
//	Draining     -       -       -      -            -             -
//
//	*  per-object loop only: a whole-set loop takes every row into a Sync.
//	** when refresh is on: it comes back to a given-up object.
//	*** ordered mode keeps its Queued rows (a whole backlog) in its own
//	    queue and heaps instead (order.go), so that a report's walk of
//	    active stays about a round.
//	**** with Config.DependsOn: waiting for a dependency (an update) or
//	    for the objects that depend on its object (a delete), in the
//	    dependency graph's lists and waitingHeaps instead (deps.go,
//	    waiting.go); neither a retry nor a
//	    failure.
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
	stBlocked                    // waits for a dependency (Config.DependsOn) or, a delete, for its dependents
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
	whyCycle                // on a dependency cycle (Config.DependsOn)
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
	// runTarget is the TargetKey of the attempt in running (ordered mode
	// with per-target caps): its target's count drops when it returns.
	runTarget string
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
	// deps are obj's dependencies (Config.DependsOn), needs the rows of
	// other tables it requires (Config.Requires), each asked once per
	// object read: nil until asked (depsOfRow, needsOfRow).
	deps  []string
	needs []needKey
	// Positions in the retry heaps (an ordered Queued row: in the
	// ordering's heaps, order.go), the refresh heap, active and
	// failingRows.
	dueIdx, askIdx, refreshIdx, activeIdx, failIdx int
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
	rows     map[string]*request[Obj]
	rowsPeak int // rows' largest size since it was last made anew (shrink.go)

	active []*request[Obj] // Queued, Busy, Running and Committing rows
	marks  []activeMark
	ready  []readyEntry[Obj] // Queued rows in arrival order (dispatch only)
	byDue  heap.Indexed[*request[Obj]]
	byAsk  heap.Indexed[*request[Obj]] // Retrying rows by askedAt: the retry low watermark
	// refreshQ holds Held and RefreshDue rows by when refresh comes.
	refreshQ heap.Indexed[*request[Obj]]

	n              [reqStateCount]int
	kinds          [statusKindCount]int // counted rows by expect's kind (Error when failing)
	blocked        int                  // Held for whyMisconfigured
	failing        int                  // rows with an error, deletes included
	failingRows    failingSet[Obj]      // those rows: health names the first of them
	failingDeletes int
	executing      int // rows with running != 0
	dirty          bool
	lastAttempt    uint64

	// deleted remembers the latest successful deletes, for Explain.
	deleted recentDeletes

	free     []*request[Obj]
	freeDets []*detail[Obj]
	dispatch bool           // per-object: the workers take the ready rows
	order    *ordering[Obj] // ordered mode (order.go): Queued rows go there, not to ready
	deps     *depGraph[Obj] // Config.DependsOn (deps.go): a row waits for its dependencies

	// How to read an object: its primary key, this reconciler's status,
	// and a hook that sees every status read (the shared-status check).
	keyOf    func(Obj) string
	statusOf func(Obj) Status
	check    func(Obj, Status)
	// owns says whether this replica owns a key (nil: every key); noticed
	// is told of a change that kept a Done or Error status this
	// reconciler did not write (nil: nobody listens).
	owns    func(string) bool
	noticed func(obj Obj, rev statedb.Revision, st Status)
	obs     *observing[Obj] // told of reads and readiness (nil: nobody observes)
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
	t.obs.entered(r, s)
	r.state, r.why = s, why
	if r.detail != nil {
		r.since = now
	}
	switch s {
	case stQueued, stBusy, stRunning, stCommitting:
		if s == stQueued && t.order != nil {
			r.gen++
			t.order.push(r, now)
			break
		}
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
	case stBlocked:
		r.gen++
		t.block(r, now)
	}
	t.n[s]++
	t.blocked += b2i(why == whyMisconfigured)
	t.count(r, +1)
	t.dirty = true
}

// leave takes r out of its state.
func (t *requests[Obj]) leave(r *request[Obj]) {
	switch r.state {
	case stQueued, stBusy, stRunning, stCommitting:
		if r.state == stQueued && t.order != nil {
			t.order.remove(r)
			break
		}
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
	case stBlocked:
		t.unblock(r)
	}
	t.n[r.state]--
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
		if d > 0 {
			t.failingRows.add(r)
		} else {
			t.failingRows.remove(r)
		}
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
	return t.newRow(key)
}

// newRow makes key's row, empty (in no state): key has none.
func (t *requests[Obj]) newRow(key string) *request[Obj] {
	var r *request[Obj]
	if n := len(t.free); n > 0 {
		r, t.free = t.free[n-1], t.free[:n-1]
	} else {
		r = new(request[Obj])
	}
	r.key, r.state = key, reqStateCount
	t.rows[key] = r
	t.rowsPeak = max(t.rowsPeak, len(t.rows))
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
	if r.tried {
		return
	}
	switch {
	case r.state == stQueued && t.order != nil:
		t.order.marks.untried.Remove(r.dueIdx)
	case r.state == stBlocked:
		t.deps.heaps.untried.Remove(r.dueIdx)
	case r.state == stQueued, r.state == stBusy, r.state == stRunning, r.state == stCommitting:
		t.marks[r.activeIdx].tried = true
	}
	r.tried = true
}

// writeBack reports whether the status write of attempt id, back from the
// committer, is still r's: r was neither replaced nor settled meanwhile.
func (t *requests[Obj]) writeBack(r *request[Obj], id uint64) bool {
	return r.state == stCommitting && r.writing == id
}

package reconciler

import (
	"time"

	"github.com/cilium/statedb"
)

// The outstanding work of a per-object reconciler: one request per key that
// asked for something and has not settled. Everything the reconciler
// reports (progress for the waits, Status(), health, the gauges) is derived
// from this one structure, and only the loop goroutine touches it.
//
// A request goes through these states:
//
//	queued   -> running           dispatched to a worker
//	running  -> committing        its result is in; its status write is out
//	                              on the committer goroutine (committer.go)
//	running  -> (settled)         succeeded, or its result is no longer wanted
//	running  -> retrying          failed, or deferred with RetryAfter
//	running  -> held              given up on: Permanent, MaxRetries, misconfiguration
//	committing -> ...             as from running, once the write is back
//	retrying -> queued            its retry came due
//	any      -> queued            a newer change of the key replaced it
//
// A settled request is forgotten. Its key stays known only while an
// attempt that ran past OperationTimeout still runs (gone): per-key order
// forbids starting another operation for the key until it returns. A
// queued request whose key is still busy that way takes no room in a
// round (keyBusy). A key this replica does not own (Config.Ownership) is
// no request at all: the model keeps it in unowned, a key and a
// revision, until it is gained or deleted (owned.go).

// reqState is where a request stands.
type reqState uint8

const (
	stQueued     reqState = iota // waits for a worker (or for its key to be free)
	stRunning                    // an attempt is out; its result is awaited
	stCommitting                 // its result is in, its status write is out on the committer
	stRetrying                   // waits for its retry to come due
	stHeld                       // given up on: settled, reported as failing
	stGone                       // settled, kept only while an overdue attempt runs
)

// request is one key's outstanding work.
type request[Obj any] struct {
	key     string
	obj     Obj              // the object as last read (a delete: the deleted object)
	rev     statedb.Revision // obj's revision
	deleted bool

	// asked is the status that asked for the work (Pending or Refreshing);
	// a retry hands Update the object with it, so Update can tell a
	// refresh from a change. expect is this reconciler's status in the
	// table as far as the loop knows: asked, or the Error it wrote since.
	// A result is written only while the table still holds expect.
	asked, expect Status

	// askedAt is the lowest revision the change that made the request can
	// have: the waits are derived from it.
	askedAt  statedb.Revision
	attempts int  // consecutive failures
	tried    bool // attempted at least once
	deferred bool // retrying after RetryAfter(d, nil): not a failure
	state    reqState
	due      time.Time // stRetrying: when

	err     string    // the last failure ("" when not failing)
	errAt   time.Time // failing since
	blocked bool      // held by a misconfiguration: the waits report it

	// requestedAt is when the change being realized was written.
	requestedAt time.Time
	// pickedAt is when the request was last queued: Status's oldest waiting.
	pickedAt time.Time

	// attempt is the id of the attempt whose result is awaited (0: none);
	// running is that of the attempt still executing (0: none), which may
	// be an overdue one whose result was already given up on (stuck), or
	// one whose result is no longer wanted (superseded, disowned).
	attempt, running uint64
	stuck            bool
	// writing is, in stCommitting, the id of the attempt whose status
	// write is out: a write that comes back to a request replaced or
	// settled meanwhile finds another id (or none) and is not its.
	writing uint64

	// enteredAt is when the request entered its state, startedAt when
	// its latest attempt started; retryAfter is set while its retry is
	// the delay an operation asked for (RetryAfter with an error), and
	// exhausted while it is held for MaxRetries: Explain reports them.
	enteredAt, startedAt  time.Time
	retryAfter, exhausted bool
	// taskSeq is the executor's sequence number of its latest task.
	taskSeq uint64

	loggedErr string    // the failure last logged (failure logging)
	loggedAt  time.Time // and when

	dueIdx, askIdx, activeIdx int // positions in the heaps and in active

	// gen counts the queuings of this record: an entry of ready is stale
	// once the record was queued again or reused for another key.
	gen uint32
}

// activeMark is what a report reads of an active request (workview.go),
// kept at the same index in work.marks as the request in work.active.
// Every report walks all active requests, and a whole-set loop debouncing
// a storm holds a second's worth of them: read through the scattered
// records, the walk was a cache miss per request (a tenth of sync-storm's
// reconciler CPU); read from one slice, it is not.
type activeMark struct {
	askedAt  statedb.Revision
	pickedAt time.Time
	tried    bool
}

// readyEntry is a queued request as it was when queued.
type readyEntry[Obj any] struct {
	r   *request[Obj]
	gen uint32
}

// work is the outstanding-work structure.
type work[Obj any] struct {
	byKey map[string]*request[Obj]

	// active holds the queued, running and committing requests: at most
	// about two rounds' worth, scanned by every report. ready are the
	// queued ones whose key is free, in the order they came. committing
	// counts the active requests whose status write is out: they no longer
	// take room in a round, so the next round is read while they are
	// written.
	active     []*request[Obj]
	marks      []activeMark
	ready      []readyEntry[Obj]
	committing int
	// keyBusy counts the queued requests whose key is still busy with an
	// earlier attempt (one past its timeout, or one whose result is no
	// longer wanted): they take no room in a round, so that a stuck
	// attempt holds up only its own key.
	keyBusy int

	// unowned holds the keys of the table this replica does not own
	// (Config.Ownership), each with the lowest revision a change of it
	// may have been made at since (owned.go). They are no requests.
	unowned map[string]statedb.Revision

	// unset holds the keys of the live objects whose status is Unset:
	// they ask nothing, and Status counts them apart (decide keeps it).
	unset map[string]struct{}

	// free holds forgotten records for reuse: a million objects
	// reconciled once otherwise cost a million allocations.
	free []*request[Obj]

	// Retrying requests, by when they are due and by the revision that
	// asked (the retry low watermark).
	byDue reqHeap[Obj]
	byAsk reqHeap[Obj]

	// Derived counts, kept by the transitions below.
	kinds          [statusKindCount]int // live requests (not deletes) by expect's kind
	deferred       int                  // retrying after RetryAfter(d, nil)
	failing        int                  // requests with an error (deletes included)
	failingDeletes int
	blocked        int // held by a misconfiguration
	running        int // attempts executing, overdue ones included
	dirty          bool

	lastAttempt uint64

	// dispatch is set for the per-object loop, whose workers take the
	// ready requests; a whole-set loop takes every request into one Sync.
	dispatch bool
}

func newWork[Obj any](dispatch bool) *work[Obj] {
	return &work[Obj]{
		byKey:    map[string]*request[Obj]{},
		dispatch: dispatch,
		byDue: reqHeap[Obj]{
			less: func(a, b *request[Obj]) bool { return a.due.Before(b.due) },
			idx:  func(r *request[Obj]) *int { return &r.dueIdx },
		},
		byAsk: reqHeap[Obj]{
			less: func(a, b *request[Obj]) bool { return a.askedAt < b.askedAt },
			idx:  func(r *request[Obj]) *int { return &r.askIdx },
		},
	}
}

// counted reports whether r counts towards the status kinds: a live
// object's outstanding request.
func (r *request[Obj]) counted() bool { return !r.deleted && r.state != stGone }

// leave takes r out of whatever its state puts it in.
func (w *work[Obj]) leave(r *request[Obj]) {
	switch r.state {
	case stQueued, stRunning:
		w.removeActive(r)
		if r.state == stQueued && r.running != 0 {
			w.keyBusy--
		}
	case stCommitting:
		w.removeActive(r)
		w.committing--
		r.writing = 0
	case stRetrying:
		w.byDue.remove(r.dueIdx)
		w.byAsk.remove(r.askIdx)
		if r.deferred {
			w.deferred--
		}
	case stHeld:
		if r.blocked {
			w.blocked--
		}
	}
	w.count(r, -1)
	w.setErr(r, "", time.Time{})
}

// count adds d to the count of r's kind as Status reports it: a failing
// object is in Error even when its status could not be written (a
// misconfiguration), else it is what the table holds.
func (w *work[Obj]) count(r *request[Obj], d int) {
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
	w.kinds[kind] += d
}

// enter puts r into state s, with r's fields already set for it.
func (w *work[Obj]) enter(r *request[Obj], s reqState, errMsg string, now time.Time) {
	r.state = s
	switch s {
	case stQueued, stRunning, stCommitting:
		r.activeIdx = len(w.active)
		w.active = append(w.active, r)
		w.marks = append(w.marks, activeMark{askedAt: r.askedAt, pickedAt: r.pickedAt, tried: r.tried})
		if s == stCommitting {
			w.committing++
		}
		if s == stQueued && r.running != 0 {
			w.keyBusy++
		}
	case stRetrying:
		w.byDue.push(r)
		w.byAsk.push(r)
		if r.deferred {
			w.deferred++
		}
	case stHeld:
		if r.blocked {
			w.blocked++
		}
	}
	w.setErr(r, errMsg, now)
	w.count(r, +1)
	w.dirty = true
}

func (w *work[Obj]) setErr(r *request[Obj], msg string, at time.Time) {
	if (r.err != "") != (msg != "") {
		d := 1
		if msg == "" {
			d = -1
		}
		w.failing += d
		if r.deleted {
			w.failingDeletes += d
		}
	}
	r.err, r.errAt = msg, at
}

func (w *work[Obj]) removeActive(r *request[Obj]) {
	last := len(w.active) - 1
	moved := w.active[last]
	w.active[r.activeIdx], moved.activeIdx = moved, r.activeIdx
	w.marks[r.activeIdx] = w.marks[last]
	w.active[last] = nil
	w.active, w.marks = w.active[:last], w.marks[:last]
}

// setTried records that r's change has been attempted: its result is in.
func (w *work[Obj]) setTried(r *request[Obj]) {
	r.tried = true
	switch r.state {
	case stQueued, stRunning, stCommitting:
		w.marks[r.activeIdx].tried = true
	}
}

// add makes a new request for key, replacing whatever was outstanding for
// it: retries follow the object, not the revision. An attempt still
// executing keeps the key busy; its result will not be wanted.
func (w *work[Obj]) add(key string, ch change[Obj], st Status, askedAt statedb.Revision, now time.Time) *request[Obj] {
	r, ok := w.byKey[key]
	if ok {
		w.leave(r)
	} else {
		r = w.alloc()
		w.byKey[key] = r
	}
	running, stuck, logged, loggedAt, gen := r.running, r.stuck, r.loggedErr, r.loggedAt, r.gen
	*r = request[Obj]{
		key: key, obj: ch.obj, rev: ch.rev, deleted: ch.deleted,
		asked: st, expect: st, askedAt: askedAt, pickedAt: now, enteredAt: now,
		running: running, stuck: stuck, loggedErr: logged, loggedAt: loggedAt, gen: gen,
	}
	if !ch.deleted && st.Kind == StatusKindPending {
		r.requestedAt = st.UpdatedAt
	}
	w.enter(r, stQueued, "", now)
	w.markReady(r)
	return r
}

// alloc returns a zeroed record, reused if one is free.
func (w *work[Obj]) alloc() *request[Obj] {
	n := len(w.free)
	if n == 0 {
		return new(request[Obj])
	}
	r := w.free[n-1]
	w.free[n-1] = nil
	w.free = w.free[:n-1]
	return r
}

// forget removes r from byKey and keeps the record for reuse.
func (w *work[Obj]) forget(r *request[Obj]) {
	delete(w.byKey, r.key)
	if len(w.free) < 4096 {
		*r = request[Obj]{gen: r.gen + 1}
		w.free = append(w.free, r)
	}
}

// settle forgets r: nothing is outstanding for its key.
func (w *work[Obj]) settle(r *request[Obj]) {
	w.leave(r)
	r.attempt = 0
	if r.running != 0 {
		w.enter(r, stGone, "", time.Time{})
		return
	}
	r.state = stGone
	w.forget(r)
	w.dirty = true
}

package reconciler

import (
	"context"
	"sync"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
)

// The whole-set loop (SyncOperations). It reads the table's changes as they
// come, collects those that ask for work, and runs one Sync at a time over
// a snapshot when the debounce allows; the Sync's result is written into
// every object it covered (syncresult.go). It shares the per-object loop's
// pieces: status writes with compare-and-swap, the guarded call (timeout,
// panics), backoff, health, metrics, progress and the snapshot.

// syncEntry is one object changed or deleted since the last successful Sync.
type syncEntry[Obj any] struct {
	change[Obj]
	status  Status           // this reconciler's status as read (for the StatusSet merge)
	mark    bool             // its status asks for a write after the Sync: not Done
	floor   statedb.Revision // the change was read after this revision
	origRev statedb.Revision // lowest revision the request that started its failures can have

	failures int  // Syncs in a row that failed it
	tried    bool // a Sync failed it: it waits for a retry
	held     bool // given up on (Permanent, MaxRetries): in every Sync, but starts none

	// requestedAt is when the request was written (its Pending status's
	// UpdatedAt; zero: unknown, or no user's change), kept while the
	// Syncs that fail it are retried: the start of its realization.
	requestedAt time.Time
}

// syncRun is one Sync: its snapshot, the changes handed to it, its result.
type syncRun[Obj any] struct {
	txn      statedb.ReadTxn
	entries  map[string]*syncEntry[Obj]
	full     bool             // asked for by a full reconciliation
	minFloor statedb.Revision // every change after this is in entries or later
	untried  int              // entries that are new requests for live objects
	failures int              // Syncs in a row that failed as a whole before this one
	start    time.Time

	// retryFloor is the lowest origRev of the failed changes it retries:
	// they are not settled until it succeeds.
	retryFloor statedb.Revision

	// Set by the Sync's goroutine.
	err error
	dur time.Duration
}

// syncLoop is the state of one run of a whole-set reconciler, owned by its
// goroutine.
type syncLoop[Obj comparable] struct {
	*reconciler[Obj]
	health cell.Health
	feed[Obj]
	pulledTo statedb.Revision // changes are read up to here
	readAll  bool             // the changes present when the run began are read
	// ownChanged is Ownership.Changed's channel, taken before Owns(nil)
	// was last asked.
	ownChanged <-chan struct{}
	// unreadWaits counts the Sync starts put off in a row because the
	// snapshot held a change not read yet; bounded so that a change the
	// iterator never returns cannot stop the Syncs.
	unreadWaits int

	backoff backoff
	status  healthState
	// failLog logs failed Syncs as the per-object loop logs failed
	// objects: a new error at once, the same one at most once a minute.
	failLog   failureLog
	loggedErr string
	loggedAt  time.Time

	// pending are the changes waiting for a Sync, by key. firstChange and
	// lastChange are when the first and the latest new request among them
	// was read (zero when none): the debounce looks at them. untried counts
	// the new requests for live objects; firstFloor is the floor of the
	// first of them; retryFloor the lowest origRev of a failed one waiting
	// for its retry (progress).
	pending     map[string]*syncEntry[Obj]
	firstChange time.Time
	lastChange  time.Time
	untried     int
	firstFloor  statedb.Revision
	hasFloor    bool
	retryFloor  statedb.Revision

	running   *syncRun[Obj]
	done      chan *syncRun[Obj] // the running Sync's result; capacity one
	overdue   chan struct{}      // the running Sync passed OperationTimeout
	isOverdue bool
	wg        sync.WaitGroup

	lastStart  time.Time
	fullWanted bool
	retryAt    time.Time // when failed changes are retried; zero when none
	failures   int       // Syncs in a row that failed as a whole
	down       bool      // the last Sync failed as a whole: new changes wait for retryAt
	lastErr    error     // the last Sync's error as a whole, for health
	lastRound  RoundInfo
	lastFull   FullInfo
	dirty      bool // report after this step

	next, full, healthTimer timer

	// While a Sync waits for its debounce (firstChange is set), new
	// changes are read at most every SyncDebounce.readEvery(): not before
	// readAt. readHeld is set while changes wait unread for readTimer.
	readAt    time.Time
	readHeld  bool
	readTimer timer
}

// maxUnreadWaits bounds unreadWaits: the window it waits out is a
// commit closing its watch channels, microseconds long.
const maxUnreadWaits = 100

func newSyncLoop[Obj comparable](r *reconciler[Obj], health cell.Health) *syncLoop[Obj] {
	return &syncLoop[Obj]{
		reconciler: r,
		health:     health,
		backoff:    newBackoff(r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax),
		status:     newHealthState(),
		failLog:    newFailureLog(r.log),
		pending:    map[string]*syncEntry[Obj]{},
		done:       make(chan *syncRun[Obj], 1),
		overdue:    make(chan struct{}, 1),
		retryFloor: ^statedb.Revision(0),
		// The first Sync runs once the table is initialized, even with
		// nothing in it: the target must then be emptied.
		fullWanted: true,
		dirty:      true,
	}
}

func (s *syncLoop[Obj]) run(ctx context.Context) error {
	if err := s.start(); err != nil {
		return err
	}
	defer s.stop()
	for {
		now := time.Now()
		s.step(ctx, now)
		if !s.sleep(ctx) {
			return nil
		}
	}
}

// start opens the change iterator.
func (s *syncLoop[Obj]) start() error {
	if s.cfg.Ownership != nil {
		s.ownChanged = s.cfg.Ownership.Changed()
	}
	return s.feed.open(s.db, s.cfg.Table, s.initializerAtNew)
}

// stop waits for a running Sync, which sees a cancelled context; its
// result is dropped: nothing is written after Stop.
func (s *syncLoop[Obj]) stop() {
	s.wg.Wait()
	for _, t := range []*timer{&s.next, &s.full, &s.healthTimer, &s.readTimer} {
		t.disarm()
	}
	s.changes.Close()
}

// step reads new changes, starts a Sync when one is due (or arms the timer
// for when it will be) and reports.
func (s *syncLoop[Obj]) step(ctx context.Context, now time.Time) {
	s.readHeld = false
	if isClosed(s.changesWatch) {
		// Once a Sync has taken the changes (firstChange is zero again),
		// the next change is read at once: it starts a debounce.
		if !s.firstChange.IsZero() && now.Before(s.readAt) {
			s.readHeld = true
			s.readTimer.arm(s.readAt.Sub(now))
		} else {
			s.read(s.db.ReadTxn(), now)
			s.readAt = now.Add(s.cfg.SyncDebounce.readEvery())
		}
	}
	if at, ok := s.nextSync(now); ok {
		if at.After(now) {
			s.next.arm(at.Sub(now))
		} else if ctx.Err() == nil {
			s.startSync(ctx, now)
		}
	}
	if s.dirty || s.status.dirty {
		s.report(now)
	}
}

// sleep waits until something happens. It returns false when stopping.
func (s *syncLoop[Obj]) sleep(ctx context.Context) bool {
	var initCh <-chan struct{}
	if !s.initialized {
		initCh = s.initWatch
	}
	changesCh := s.changesWatch
	if s.readHeld {
		changesCh = nil
	}
	select {
	case <-ctx.Done():
		return false
	case <-s.ownChanged:
		s.ownChanged = s.cfg.Ownership.Changed() // before nextSync asks Owns again
		s.dirty = true                           // leading now, or not: nextSync asks
	case <-changesCh:
	case <-s.readTimer.c():
		s.readTimer.fired()
	case <-initCh:
		s.initialized, s.dirty = true, true
	case <-s.triggerFull:
		s.fullWanted = true
	case run := <-s.done:
		s.finishSync(ctx, run, time.Now())
	case <-s.overdue:
		s.isOverdue = s.running != nil
		s.dirty = true
	case <-s.wake:
		s.dirty = true
	case <-s.next.c():
		s.next.fired()
	case <-s.full.c():
		s.full.fired()
		s.fullWanted = true
	case <-s.healthTimer.c():
		s.healthTimer.fired()
		s.status.dirty = true
	}
	return true
}

// read takes the changes up to txn into pending.
func (s *syncLoop[Obj]) read(txn statedb.ReadTxn, now time.Time) {
	seq, watch := s.changes.Next(txn)
	floor := s.pulledTo
	for ch, rev := range seq {
		s.pulledTo = rev
		s.onChange(change[Obj]{obj: ch.Object, rev: ch.Revision, deleted: ch.Deleted}, floor, now)
	}
	if !s.readAll {
		// Deletes from before the run left no change to read: the first
		// read covers the table as it was when the run began. After it,
		// the mark moves only with what the iterator returns (see pull).
		s.readAll = true
		s.pulledTo = max(s.pulledTo, s.startRev)
	}
	s.changesWatch = watch
	s.dirty = true // progress moves with pulledTo
}

// onChange decides what one change asks for. Most changes read while a
// storm goes on are this reconciler's own Done writes, which ask for
// nothing: their entry is only built when it is kept.
func (s *syncLoop[Obj]) onChange(ch change[Obj], floor statedb.Revision, now time.Time) {
	key := s.keyOf(ch.obj)
	if ch.deleted {
		s.request(key, &syncEntry[Obj]{change: ch, floor: floor, origRev: floor + 1}, now)
		return
	}
	st := s.cfg.GetObjectStatus(ch.obj)
	entry := func(mark bool) *syncEntry[Obj] {
		e := &syncEntry[Obj]{change: ch, status: st, mark: mark, floor: floor, origRev: floor + 1}
		if st.Kind == StatusKindPending {
			e.requestedAt = st.UpdatedAt
		}
		return e
	}
	known := s.pending[key]
	switch {
	case st.IsPendingOrRefreshing() || !st.Kind.Valid():
		if s.sameRequest(key, st) {
			// Another reconciler's status write on an object whose
			// request is waiting or being synced: follow its revision.
			if known != nil {
				known.change = ch
			}
			return
		}
		s.request(key, entry(true), now)
	case ch.rev <= s.startRev:
		// There before this run: in the first Sync's changes, since
		// nothing is known of what an earlier run applied. An Error left
		// by it is retried.
		if st.Kind != StatusKindDone {
			s.request(key, entry(true), now)
		} else {
			s.add(key, entry(false))
		}
	case known != nil:
		// A status write on a waiting object: ours after a failed Sync,
		// or another reconciler's. Follow its newest revision; the
		// request, and when it was written, stay.
		known.change, known.status = ch, st
	}
	// Otherwise a status write (most often our own Done): nothing to do.
}

// sameRequest reports whether st is the status of a request already
// waiting or being synced for key.
func (s *syncLoop[Obj]) sameRequest(key string, st Status) bool {
	if st.ID == 0 {
		return false
	}
	same := func(e *syncEntry[Obj]) bool {
		return e != nil && !e.deleted && e.status.ID == st.ID && e.status.Kind == st.Kind
	}
	if same(s.pending[key]) {
		return true
	}
	return s.running != nil && same(s.running.entries[key])
}

// request adds a new request: it replaces whatever waited for key (a
// retry included: retries follow the object) and wakes the debounce.
func (s *syncLoop[Obj]) request(key string, e *syncEntry[Obj], now time.Time) {
	s.add(key, e)
	if s.firstChange.IsZero() {
		s.firstChange = now
	}
	s.lastChange = now
}

// add puts an untried entry into pending.
func (s *syncLoop[Obj]) add(key string, e *syncEntry[Obj]) {
	if old := s.pending[key]; old.isUntried() {
		s.untried--
	}
	if e.isUntried() {
		s.untried++
	}
	if !s.hasFloor {
		s.firstFloor, s.hasFloor = e.floor, true
	}
	s.pending[key] = e
}

// isUntried reports whether e is a new request for a live object, not yet
// failed: what the snapshot counts as Pending.
func (e *syncEntry[Obj]) isUntried() bool {
	return e != nil && e.mark && !e.deleted && !e.tried
}

// nextSync is when the next Sync may start, if one is wanted.
func (s *syncLoop[Obj]) nextSync(now time.Time) (time.Time, bool) {
	if s.running != nil || s.suspended() || (s.cfg.Ownership != nil && !s.cfg.Ownership.Owns(nil)) {
		return time.Time{}, false
	}
	if ok, wait := s.desiredComplete(s.db, s.cfg.Table, s.cfg.InitialPruneDelay, s.log); !ok {
		if wait > 0 {
			return now.Add(wait), true
		}
		return time.Time{}, false
	}
	if s.fullWanted {
		return now, true
	}
	var at time.Time
	ok := !s.firstChange.IsZero()
	if ok {
		at = s.cfg.SyncDebounce.due(s.firstChange, s.lastChange, s.lastStart)
		if s.down {
			// The target is down: new changes wait for the retry, so a
			// trickle of them does not hammer it.
			at = later(at, s.retryAt)
		}
	}
	if !s.retryAt.IsZero() && (!ok || s.retryAt.Before(at)) {
		at, ok = s.retryAt, true
	}
	return at, ok
}

package reconciler

import (
	"context"
	"sync"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
)

// The whole-set loop (SyncOperations). It reads the table's changes as they
// come into the same outstanding-work structure as the per-object loop
// (work.go), and runs one Sync at a time over a snapshot, when the
// debounce allows, for every request at once: a Sync is the executor. Its
// result is written into every object it covered (syncresult.go), under
// the one write rule (commit.go), and everything reported is derived from
// the work, as in the per-object loop (report.go).

// syncRun is one Sync: its snapshot, the requests it covers, its result.
type syncRun[Obj any] struct {
	txn   statedb.ReadTxn
	id    uint64          // the attempt id of its requests
	taken []*request[Obj] // the requests taken; those still carrying id are its
	// all is set when no Sync has succeeded yet in this run: the changes
	// are every object of the snapshot, and the deletes read since.
	all      bool
	changes  []Change[Obj]
	full     bool // asked for by a full reconciliation
	failures int  // Syncs in a row that failed as a whole before this one
	start    time.Time
	// settled is set once the loop recorded its outcome: at its deadline
	// (OperationTimeout), its result when it returns is discarded.
	settled bool

	// Set by the Sync's goroutine.
	err error
	dur time.Duration
}

// syncLoop is the state of one run of a whole-set reconciler, owned by its
// goroutine; the running Sync's goroutine owns only its syncRun until it
// hands it back on done.
type syncLoop[Obj comparable] struct {
	*reconciler[Obj]
	health cell.Health
	feed[Obj]
	work *work[Obj]

	// readTo is the last revision the change iterator returned; readAll
	// is set once every change present when the run began is read.
	readTo  statedb.Revision
	readAll bool
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

	// synced is set once a Sync succeeded in this run: from then on a
	// Sync's changes are the outstanding requests.
	synced bool
	// firstChange and lastChange are when the first and the latest new
	// request since the last Sync started were read (zero when none):
	// the debounce looks at them.
	firstChange time.Time
	lastChange  time.Time

	running   *syncRun[Obj]
	done      chan *syncRun[Obj] // the running Sync's result; capacity one
	overdue   chan *syncRun[Obj] // a Sync passed OperationTimeout; capacity one
	isOverdue bool
	wg        sync.WaitGroup
	taken     []*request[Obj] // reused from Sync to Sync
	ownWrites revRanges       // the revisions of the latest status commits

	lastStart  time.Time
	fullWanted bool
	failures   int   // Syncs in a row that failed as a whole: their backoff
	down       bool  // the last Sync failed as a whole: new changes wait for its retry
	lastErr    error // the last Sync's error as a whole, for health
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

	// ask carries Explain's questions; reportSig is Explanation.Changed.
	ask       <-chan explainRequest
	reportSig reportSignal
}

// maxUnreadWaits bounds unreadWaits: the window it waits out is a
// commit closing its watch channels, microseconds long.
const maxUnreadWaits = 100

func newSyncLoop[Obj comparable](r *reconciler[Obj], health cell.Health) *syncLoop[Obj] {
	return &syncLoop[Obj]{
		reconciler: r,
		health:     health,
		work:       newWork[Obj](false),
		backoff:    newBackoff(r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax),
		status:     newHealthState(),
		failLog:    newFailureLog(r.log),
		done:       make(chan *syncRun[Obj], 1),
		overdue:    make(chan *syncRun[Obj], 1),
		// The first Sync runs once the table is initialized, even with
		// nothing in it: the target must then be emptied.
		fullWanted: true,
		dirty:      true,
	}
}

func (s *syncLoop[Obj]) run(ctx context.Context, ask <-chan explainRequest) error {
	s.ask = ask
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
	s.shared.start(s.registry, s.regName, s.cfg.Table.Name())
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
	s.reportSig.reported()
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
			s.readTimer.armAt(s.readAt)
		} else {
			s.read(s.db.ReadTxn(), now)
			s.readAt = now.Add(s.cfg.SyncDebounce.readEvery())
		}
	}
	if at, ok := s.nextSync(now); ok {
		if at.After(now) {
			s.next.armAt(at)
		} else if ctx.Err() == nil {
			s.startSync(ctx, now)
		}
	}
	if s.dirty || s.status.dirty || s.work.dirty {
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
		s.ownChanged = s.cfg.Ownership.Changed() // before Owns is asked again
		s.dirty = true
	case <-changesCh:
	case <-s.readTimer.c():
		s.readTimer.fired()
	case <-initCh:
		s.initialized, s.dirty = true, true
	case <-s.triggerFull:
		s.fullWanted = true
	case run := <-s.done:
		s.finishSync(ctx, run, time.Now())
	case run := <-s.overdue:
		s.syncOverdue(ctx, run, time.Now())
	case <-s.wake:
		s.dirty = true
	case req := <-s.ask:
		req.reply <- s.explain(req.key, time.Now())
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

// read takes the changes up to txn into the outstanding work.
func (s *syncLoop[Obj]) read(txn statedb.ReadTxn, now time.Time) {
	seq, watch := s.changes.Next(txn)
	// As in the per-object loop (pull): a change read now may have been
	// made at any revision after what was read before.
	askedAt := s.readTo + 1
	for ch, rev := range seq {
		s.readTo = rev
		if s.onChange(change[Obj]{obj: ch.Object, rev: ch.Revision, deleted: ch.Deleted}, askedAt, now) {
			if s.firstChange.IsZero() {
				s.firstChange = now
			}
			s.lastChange = now
		}
	}
	if !s.readAll {
		// Deletes from before the run left no change to read: the first
		// read covers the table as it was when the run began. After it,
		// the mark moves only with what the iterator returns (see pull).
		s.readAll = true
		s.readTo = max(s.readTo, s.startRev)
	}
	s.ownWrites.readPast(s.readTo)
	s.changesWatch = watch
	s.dirty = true // progress moves with readTo
}

// onChange decides what one change asks for, by the rule the per-object
// loop reads changes by, and reports whether it made a new request.
func (s *syncLoop[Obj]) onChange(ch change[Obj], askedAt statedb.Revision, now time.Time) bool {
	return s.readChange(s.work, &s.ownWrites, &s.status, ch, askedAt, s.startRev, now)
}

// leading reports whether this replica syncs: always without
// Config.Ownership, else while it owns the whole set. A loss of the lead
// and a regain that both come before the loop looks again are not seen as
// a new term (Ownership has no term to compare); a lead lost for less than
// a step is rare, and its Syncs were fenced meanwhile.
func (s *syncLoop[Obj]) leading() bool {
	return s.cfg.Ownership == nil || s.cfg.Ownership.Owns(nil)
}

// standby notes that another replica leads: it may change the target
// meanwhile, so this replica's next term begins with a Sync at once that
// lists every object, as a run's first Sync does.
func (s *syncLoop[Obj]) standby() {
	s.synced, s.fullWanted = false, true
}

// nextSync is when the next Sync may start, if one is wanted: a full
// reconciliation at once, new requests after their debounce (and, while
// the target is down, not before the retry), failed ones at their retry.
func (s *syncLoop[Obj]) nextSync(now time.Time) (time.Time, bool) {
	if !s.leading() {
		s.standby()
		return time.Time{}, false
	}
	if s.running != nil || s.suspended() {
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
	retryAt, retry := s.work.nextDue()
	var at time.Time
	ok := !s.firstChange.IsZero()
	if ok {
		at = s.cfg.SyncDebounce.due(s.firstChange, s.lastChange, s.lastStart)
		if s.down && retry {
			// The target is down: new changes wait for the retry, so a
			// trickle of them does not hammer it.
			at = later(at, retryAt)
		}
	}
	if retry && (!ok || retryAt.Before(at)) {
		at, ok = retryAt, true
	}
	return at, ok
}

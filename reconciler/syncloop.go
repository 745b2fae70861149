package reconciler

import (
	"context"
	"fmt"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/clock"
	"github.com/converge-go/converge/reconciler/internal/health"
)

// The whole-set loop (SyncOperations). It reads the table's changes into
// the same request table as the per-object loop (table.go), and runs one
// Sync at a time over a snapshot, when the debounce allows, for every row
// at once: a Sync is the executor (execute.go's runSync). Its result is
// judged, written and settled for every row it covered by the per-object
// loop's rules (commit.go), and everything reported is derived from the
// table (report.go).

// syncLoop is one run of a whole-set reconciler, owned by its goroutine;
// the running Sync's goroutine owns only its syncRun until it hands it
// back on done.
type syncLoop[Obj comparable] struct {
	*reconciler[Obj]
	health cell.Health
	feed[Obj]
	t       *requests[Obj]
	runner  runner[Obj]
	commits *committer[Obj]
	status  health.State

	ownChanged  <-chan struct{} // Ownership.Changed's, taken before Owns(nil) was last asked
	unreadWaits int             // Sync starts put off in a row for a change not read yet
	// synced is set once a Sync succeeded in this run; firstChange and
	// lastChange are when the first and the latest request since the last
	// Sync started were read (the debounce looks at them).
	synced                  bool
	firstChange, lastChange time.Time

	prunedTo  statedb.Revision // the snapshot of the latest Sync that succeeded
	running   *syncRun[Obj]
	done      chan *syncRun[Obj] // the running Sync's result; capacity one
	overdue   chan *syncRun[Obj] // a Sync passed OperationTimeout; capacity one
	isOverdue bool

	lastStart  time.Time
	fullWanted bool
	failures   int   // Syncs in a row that failed as a whole: their backoff
	down       bool  // the last Sync failed as a whole: new changes wait for its retry
	lastErr    error // the last Sync's error as a whole, for health
	lastFull   FullInfo
	dirty      bool // report after this step

	next, full, healthTimer clock.Timer
	// While a Sync waits for its debounce, new changes are read at most
	// every SyncDebounce.readEvery(): not before readAt; readHeld while
	// changes wait unread for readTimer.
	readAt    time.Time
	readHeld  bool
	readTimer clock.Timer

	ask       <-chan explainRequest
	reportSig reportSignal
}

// maxUnreadWaits bounds unreadWaits: the window it waits out is a commit
// closing its watch channels, microseconds long.
const maxUnreadWaits = 100

func newSyncLoop[Obj comparable](r *reconciler[Obj], hc cell.Health) *syncLoop[Obj] {
	s := &syncLoop[Obj]{reconciler: r, health: hc, t: r.newRequests(false), status: health.New(),
		done: make(chan *syncRun[Obj], 1), overdue: make(chan *syncRun[Obj], 1),
		// The first Sync runs once the table is initialized, even with
		// nothing in it: the target must then be emptied.
		fullWanted: true, dirty: true}
	s.runner = runner[Obj]{reconciler: r}
	s.commits = newCommitter(r, s.t, &s.status)
	s.t.obs = r.obs
	return s
}

func (s *syncLoop[Obj]) run(ctx context.Context, ask <-chan explainRequest) error {
	s.ask = ask
	if s.cfg.Ownership != nil {
		s.ownChanged = s.cfg.Ownership.Changed()
	}
	s.shared.start(s.registry, s.regName, s.cfg.Table.Name())
	if _, err := s.feed.open(s.db, s.cfg.Table, s.initializerAtNew); err != nil {
		return err
	}
	watchWrites(s.reconciler, s.t, &s.feed)
	defer func() {
		// A running Sync sees a cancelled context; its result is dropped.
		// One that ignores its context is waited for only so long.
		s.awaitSync()
		for _, t := range []*clock.Timer{&s.next, &s.full, &s.healthTimer, &s.readTimer} {
			t.Disarm()
		}
		s.changes.Close()
		s.reportSig.reported()
	}()
	for ctx.Err() == nil {
		s.step(ctx, time.Now())
		if !s.sleep(ctx) {
			break
		}
	}
	return nil
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
			s.readTimer.ArmAt(s.readAt)
		} else {
			s.read(s.db.ReadTxn(), now)
			s.readAt = now.Add(s.cfg.SyncDebounce.readEvery())
		}
	}
	if at, ok := s.nextSync(now); ok {
		if at.After(now) {
			s.next.ArmAt(at)
		} else if ctx.Err() == nil {
			s.startSync(ctx, now)
		}
	}
	if s.dirty || s.status.Dirty || s.t.dirty {
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
	case <-s.readTimer.C():
		s.readTimer.Fired()
	case <-initCh:
		s.initialized, s.dirty = true, true
	case <-s.triggerFull:
		s.fullWanted = true
	case run := <-s.done:
		s.finishSync(ctx, run, time.Now())
	case run := <-s.overdue:
		if run == s.running && !run.settled { // else its result came first, with ErrTimeout
			s.isOverdue, run.settled = true, true
			s.settleRun(ctx, run, timeoutError(OpSync, s.cfg.OperationTimeout), s.cfg.OperationTimeout, time.Now())
		}
	case <-s.wake:
		s.dirty = true
	case req := <-s.ask:
		req.reply <- explainSync(s, req.key, time.Now())
	case <-s.next.C():
		s.next.Fired()
	case <-s.full.C():
		s.full.Fired()
		s.fullWanted = true
	case <-s.healthTimer.C():
		s.healthTimer.Fired()
		s.status.Dirty = true
	}
	return true
}

// read takes the changes up to txn into the request table.
func (s *syncLoop[Obj]) read(txn statedb.ReadTxn, now time.Time) {
	seq, watch := s.changes.Next(txn)
	askedAt := s.readTo + 1 // as in the per-object loop's pull
	for ch, rev := range seq {
		s.readTo = rev
		if s.t.read(change[Obj]{obj: ch.Object, rev: ch.Revision, deleted: ch.Deleted}, &s.commits.own, askedAt, s.startRev, now) {
			if s.firstChange.IsZero() {
				s.firstChange = now
			}
			s.lastChange = now
		}
	}
	s.markRead(true)
	s.commits.own.ReadPast(s.readTo)
	s.changesWatch = rearm(s.changes, txn, watch)
	s.dirty = true // progress moves with readTo
}

// leading reports whether this replica syncs: always without
// Config.Ownership, else while it owns the whole set. A loss of the lead
// and a regain before the loop looks again are not seen as a new term
// (Ownership has no term to compare); its Syncs were fenced meanwhile.
func (s *syncLoop[Obj]) leading() bool {
	return s.cfg.Ownership == nil || s.cfg.Ownership.Owns(nil)
}

// nextSync is when the next Sync may start, if one is wanted: a full
// reconciliation at once, new requests after their debounce (while the
// target is down, not before the retry), failed ones at their retry
// (paced by the breaker while it is open).
func (s *syncLoop[Obj]) nextSync(now time.Time) (time.Time, bool) {
	if !s.leading() {
		// Another replica may change the target meanwhile: this
		// replica's next term begins with a Sync of every object.
		s.synced, s.fullWanted = false, true
		return time.Time{}, false
	}
	if s.running != nil || s.suspended() {
		return time.Time{}, false
	}
	if ok, wait := s.desiredComplete(s.db, s.cfg.Table, s.cfg.InitialPruneDelay, s.log); !ok {
		return now.Add(wait), wait > 0
	}
	if s.fullWanted {
		return now, true
	}
	retryAt, retry := s.t.nextDue()
	retryAt = s.commits.breaker.NextRetry(retryAt)
	var at time.Time
	ok := !s.firstChange.IsZero()
	if ok {
		at = s.cfg.SyncDebounce.due(s.firstChange, s.lastChange, s.lastStart)
		if s.down && retry {
			at = later(at, retryAt) // a trickle of changes does not hammer a dead target
		}
	}
	if retry && (!ok || retryAt.Before(at)) {
		at, ok = retryAt, true
	}
	return at, ok
}

// startSync hands every row with work, up to a fresh snapshot, to a Sync
// on its own goroutine.
func (s *syncLoop[Obj]) startSync(ctx context.Context, now time.Time) {
	txn := s.db.ReadTxn()
	s.read(txn, now) // the changes handed over are exactly the snapshot's
	if s.readTo < s.cfg.Table.Revision(txn) && s.unreadWaits < maxUnreadWaits {
		// The snapshot holds a change the iterator did not return: its
		// commit published the data and is closing the watch channels
		// right now. Start once it is read (the loop wakes then).
		s.unreadWaits++
		s.next.Arm(time.Millisecond)
		return
	}
	s.unreadWaits = 0
	s.commits.breaker.AllowRetries(now, 1) // a Sync is one canary
	taken, id := s.t.takeAll(nil, now)
	run := &syncRun[Obj]{txn: txn, id: id, taken: taken, all: !s.synced, full: s.fullWanted, failures: s.failures, start: now}
	for _, r := range taken {
		if r.deleted || !run.all {
			run.changes = append(run.changes, Change[Obj]{Object: r.obj, Revision: r.rev, Deleted: r.deleted})
		}
	}
	s.firstChange, s.lastChange, s.fullWanted, s.lastStart = time.Time{}, time.Time{}, false, now
	s.full.Disarm()
	s.running, s.dirty = run, true
	go func() {
		// Past OperationTimeout it keeps its place (no second Sync runs
		// beside it); the signal names its run, so that one that comes
		// after its result (call returns ErrTimeout then too) fails no
		// later Sync.
		overrun := func() {
			select {
			case s.overdue <- run:
			case <-ctx.Done():
			}
		}
		start := time.Now()
		if s.obs != nil {
			start = s.obs.syncStarted(s.cfg.Table.NumObjects(run.txn), run.failures+1)
		}
		run.err = s.runner.runSync(ctx, run, overrun)
		run.dur = time.Since(start)
		if s.obs != nil {
			s.obs.syncFinished(s.cfg.Table.NumObjects(run.txn), run.failures+1, s.classify(run.err, run.failures), run.err, start)
		}
		s.done <- run // never blocks: one Sync at a time
	}()
}

// finishSync takes a Sync's result when its goroutine hands it back.
func (s *syncLoop[Obj]) finishSync(ctx context.Context, run *syncRun[Obj], now time.Time) {
	s.running, s.isOverdue, s.dirty = nil, false, true
	if !run.settled {
		s.settleRun(ctx, run, run.err, run.dur, now)
	}
}

// settleRun records the outcome err of Sync run for every row it still
// covers, in write transactions of at most RoundSize statuses.
func (s *syncLoop[Obj]) settleRun(ctx context.Context, run *syncRun[Obj], err error, dur time.Duration, now time.Time) {
	if ctx.Err() != nil {
		return // stopping: nothing is written after Stop
	}
	mine := run.taken[:0]
	for _, r := range run.taken {
		if s.t.takeResult(r, run.id) {
			mine = append(mine, r)
		}
	}
	if !s.leading() {
		// Another replica leads now: nothing is written here, and the
		// rows wait for this replica's next term.
		for _, r := range mine {
			s.t.untake(r)
		}
		s.synced, s.fullWanted = false, true
		return
	}
	failed, whole := s.perObject(err)
	s.metrics.Operation(OpSync, s.classify(whole, run.failures), 0, dur)
	if run.full {
		s.metrics.FullReconciliation(now.Sub(run.start), whole)
		s.lastFull = FullInfo{At: now, Duration: now.Sub(run.start), Error: errString(whole)}
	}
	s.wholeOutcome(whole)
	if whole == nil {
		s.prunedTo = s.cfg.Table.Revision(run.txn)
	}
	outcomes := make([]outcome[Obj], 0, len(mine))
	for _, r := range mine {
		o := outcome[Obj]{r: r, op: OpSync, attempt: run.id, err: whole, rev: r.rev}
		if whole != nil && !isDeferral(whole) {
			o.failures = s.failures // the target is down: the Syncs' backoff
		}
		if f, ok := failed[r.key]; ok {
			delete(failed, r.key)
			o.err = f.Err
		}
		outcomes = append(outcomes, o)
	}
	// Objects the Sync failed that asked for nothing (the renderer rejects
	// them now): Error as of the snapshot, and retried.
	get := func(obj Obj) (Obj, statedb.Revision, bool) { return s.cfg.Table.Get(run.txn, s.queryOf(obj)) }
	for _, r := range s.t.failUnchanged(failed, get, now) {
		outcomes = append(outcomes, outcome[Obj]{r: r, op: OpSync, err: failed[r.key].Err, rev: r.rev})
	}
	counts := map[Result]int{}
	for _, o := range outcomes {
		counts[s.classify(o.err, o.r.attempts)]++
	}
	for rest := outcomes; len(rest) > 0; rest = rest[min(len(rest), s.cfg.RoundSize):] {
		job := s.commits.newJob(now)
		for i := range rest[:min(len(rest), s.cfg.RoundSize)] {
			s.commits.judgeInto(job, &rest[i], now)
		}
		s.commits.commit(ctx, job, false, now)
	}
	for res, n := range counts {
		s.metrics.BatchEntries(OpSync, res, n)
	}
	if s.cfg.FullReconciliationInterval != Off {
		s.full.Arm(s.cfg.FullReconciliationInterval)
	}
}

// wholeOutcome records what the Sync as a whole came to: the backoff of
// the Syncs failing in a row and health's error.
func (s *syncLoop[Obj]) wholeOutcome(whole error) {
	switch {
	case whole == nil:
		s.down, s.lastErr, s.failures, s.synced = false, nil, 0, true
	case isDeferral(whole):
		// Not ready, not a failure: statuses stay, the rows wait.
	default:
		s.down, s.failures = true, s.failures+1
		_, s.lastErr = s.failure(whole, s.failures-1)
	}
}

// report publishes what the request table says (report.go). A replica
// that does not lead keeps its rows for a takeover, but reports them as
// another replica's.
func (s *syncLoop[Obj]) report(now time.Time) {
	defer s.reportSig.reported()
	whole := health.Whole{Op: "sync", Err: s.lastErr}
	if s.isOverdue {
		whole.Err = fmt.Errorf("%w: still running after %s", ErrTimeout, s.cfg.OperationTimeout)
	}
	publish(s.reconciler, s.t, &s.status, s.health, now, reportParts{
		readTo: s.readTo, initialized: s.initialized, prunedTo: s.prunedTo, inFlight: b2i(s.running != nil && !s.isOverdue),
		stuck: b2i(s.isOverdue), standby: !s.leading(),
		ownChanged: s.ownChanged, whole: whole, lastRound: s.commits.lastRound, lastFull: s.lastFull,
		healthTimer: &s.healthTimer,
	})
	s.dirty = false
}

package reconciler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
)

// change is one change read from the table: an object at a revision, or its
// deletion.
type change[Obj any] struct {
	obj     Obj
	rev     statedb.Revision
	deleted bool
}

// item is one object's unit of work, from being picked up to its commit.
type item[Obj any] struct {
	key string
	change[Obj]
	floor    statedb.Revision // the request was made after this revision
	origRev  statedb.Revision // lowest revision the request that started this run of failures can have
	failures int              // consecutive failures before this attempt
	status   Status           // this reconciler's status of obj as picked up (for merging)
	pickedAt time.Time
	// requestedAt is when the change a retry realizes was written,
	// carried from the first attempt; the whole-set loop sets it on
	// every write (realization.go).
	requestedAt time.Time

	// Set by the worker.
	target Obj   // the clone handed to Update; it carries the status into the table
	cloned bool  // target was made (it is not when CloneObject panicked or misbehaved)
	err    error // the operation's result
	result Result

	// Set when the result is committed (commit.go).
	action     commitAction
	statusErr  error       // the error the status reports: err, wrapped when given up on
	giveUp     bool        // Permanent, or MaxRetries spent
	newStatus  Status      // the status to write (actWrite)
	outcome    statusWrite // what became of the write; set by the committer
	reinserted bool        // a failed delete's object is back in the table

	busyAt int // index in loop.busyList

	// next is the newest change of this key seen while this item was
	// busy; it is handled once this item is committed.
	next      change[Obj]
	nextFloor statedb.Revision
	hasNext   bool
}

// loop is the state of one run of a reconciler: everything here is owned by
// the loop goroutine, except what the workers share through results.
type loop[Obj comparable] struct {
	*reconciler[Obj]
	health cell.Health
	feed[Obj]
	backoff backoff
	retries *retryQueue[Obj]

	// busy holds every key that is picked up and not yet committed (ready,
	// running or finished): per-key order rests on it. busyList holds the
	// same items, for report's walk over them (a slice walks several
	// times faster than a map, and report walks after every round).
	busy     map[string]*item[Obj]
	busyList []*item[Obj]
	// ready are busy items waiting to be handed to the workers.
	ready []*item[Obj]
	// pulledTo is the revision up to which the change iterator is read.
	pulledTo statedb.Revision
	// moreChanges is set when a round stopped before reading all changes.
	moreChanges bool
	// now is the time of the latest round.
	now time.Time
	// roundTxn is the snapshot of the latest round; operations read it.
	roundTxn statedb.ReadTxn

	work    chan task[Obj]
	results *resultBox[Obj]
	// abandoned counts workers that gave their place away while stuck in
	// an operation past its timeout.
	abandoned atomic.Int32
	taken     []task[Obj] // reused by plan
	wg        sync.WaitGroup

	// Commits whose writes are out on the committer goroutine: at most
	// maxOutJobs, holding outItems items (committer.go).
	freeJobs      []*commitJob[Obj]
	outJobs       int
	outItems      int
	toCommitter   chan *commitJob[Obj]
	fromCommitter chan *commitJob[Obj]

	// inline runs the operations on the loop's own goroutine, with no
	// worker: with Concurrency 1 and no OperationTimeout there is no one
	// to run beside and no deadline to hand a stuck operation over at, so
	// the hand-offs to and from a worker would only add latency.
	inline bool
	// ctx is the run's context, for operations run inline.
	ctx context.Context
	// landedNow is set when a commit's writes came back from the
	// committer, so that the next step reports.
	landedNow bool
	// free holds committed items for reuse: one fewer allocation per
	// object.
	free []*item[Obj]

	// nopMetrics skips timing operations nobody records.
	nopMetrics bool

	lastRound RoundInfo
	lastFull  FullInfo
	full      fullState
	breaker   breaker
	refresh   refreshState[Obj]
	status    healthState
}

func newLoop[Obj comparable](r *reconciler[Obj], health cell.Health) *loop[Obj] {
	return &loop[Obj]{
		reconciler: r,
		health:     health,
		backoff:    newBackoff(r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax),
		retries:    newRetryQueue[Obj](),
		busy:       map[string]*item[Obj]{},
		work:       make(chan task[Obj], r.cfg.RoundSize+2),
		results:    newResultBox[Obj](),
		full:       fullState{wanted: r.cfg.FullReconciliationInterval != Off},
		status:     newHealthState(),
		breaker:    breaker{log: r.log},

		freeJobs:      []*commitJob[Obj]{new(commitJob[Obj]), new(commitJob[Obj])},
		toCommitter:   make(chan *commitJob[Obj], maxOutJobs),
		fromCommitter: make(chan *commitJob[Obj], maxOutJobs),

		inline:     r.cfg.Concurrency == 1 && r.cfg.OperationTimeout == 0,
		nopMetrics: r.metrics == ReconcilerMetrics(NopMetrics{}),
	}
}

// closedCh is a channel that is always ready.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (l *loop[Obj]) run(ctx context.Context) error {
	if err := l.start(ctx); err != nil {
		return err
	}
	defer l.stop()
	timers := newLoopTimers()
	defer timers.stop()
	for {
		now := time.Now()
		if !l.step(ctx, now, timers) || !l.sleep(ctx, now, timers) {
			return nil
		}
	}
}

// start opens the change iterator and starts the workers and the committer.
func (l *loop[Obj]) start(ctx context.Context) error {
	if err := l.feed.open(l.db, l.cfg.Table); err != nil {
		return err
	}
	l.ctx = ctx
	if !l.inline {
		for range l.cfg.Concurrency {
			l.wg.Add(1)
			go l.worker(ctx)
		}
	}
	l.wg.Add(1)
	go l.committer(ctx)
	return nil
}

// stop ends the workers and the committer. Workers drop what they have not
// started (ctx is done) and the running operations see a cancelled
// context. A write out on the committer is aborted. Nothing is committed
// any more.
func (l *loop[Obj]) stop() {
	close(l.work)
	close(l.toCommitter)
	l.wg.Wait()
	l.changes.Close()
}

// step does what the loop can do now: commit, full reconciliation, a
// round, refresh and the report. It returns false when stopping.
func (l *loop[Obj]) step(ctx context.Context, now time.Time, timers *loopTimers) bool {
	// Commit what the workers finished: the writes go out to the
	// committer when more work waits to be picked up meanwhile.
	committed := l.landedNow
	l.landedNow = false
	if l.readyToCommit(now, timers) {
		if ctx.Err() != nil {
			return false
		}
		committed = l.commit(ctx, now, timers, l.overlapCommit(now)) || committed
	}

	// Start, wait for or postpone a full reconciliation: it decides
	// whether new work may be picked up.
	l.stepFull(now, timers)

	pulled := l.stepRound(now, timers)
	l.dispatch()
	if l.inline && l.readyToCommit(now, timers) {
		// The round ran right here: commit it now, no wake-up needed.
		// Whether the next round may start is a question for after the
		// round: at now it had just taken the limiter's token, and a
		// bulk load's rounds would all be committed in place, none
		// overlapped with the next.
		if ctx.Err() != nil {
			return false
		}
		committed = l.commit(ctx, now, timers, l.overlapCommit(time.Now())) || committed
	}
	l.stepRefresh(ctx, now, timers)
	if pulled || committed || l.status.dirty {
		l.report(now, timers)
	}
	return true
}

// canPull reports whether new work may be picked up: no full
// reconciliation is draining the operations, not suspended, and there is
// room in the round.
func (l *loop[Obj]) canPull() bool {
	return !l.full.draining() && !l.suspended() && l.budget() > 0
}

// stepRound picks up new work when there is room for it and something
// waits, pacing rounds with the round limiter. Only a round that picked up
// work takes a token: the reconciler's own status writes come back
// through the change iterator right after every round, and reading them
// must not make the user's next change wait. It reports whether it read.
func (l *loop[Obj]) stepRound(now time.Time, timers *loopTimers) bool {
	if !l.canPull() || !(l.moreChanges || isClosed(l.changesWatch) || l.retryDue(now)) {
		return false
	}
	if d := l.roundDelay(now); d > 0 {
		timers.round.arm(d)
		return false
	}
	var picked int
	l.changesWatch, picked = l.pull(now)
	if picked > 0 {
		l.cfg.RoundRateLimiter.AllowN(now, 1)
	}
	return true
}

// sleep waits until something happens. It returns false when stopping.
func (l *loop[Obj]) sleep(ctx context.Context, now time.Time, timers *loopTimers) bool {
	canPull := l.canPull()
	var changesCh <-chan struct{}
	if canPull && !timers.round.armed {
		changesCh = l.changesWatch
	}
	if next, ok := l.retries.next(); ok && canPull && !timers.round.armed {
		timers.retry.arm(l.breaker.nextRetry(next).Sub(now))
	}
	var initCh <-chan struct{}
	if !l.initialized {
		initCh = l.initWatch
	}
	select {
	case <-ctx.Done():
		return false
	case <-changesCh:
	case <-initCh:
		l.initialized = true
	case <-l.triggerFull:
		l.full.wanted = true
	case <-l.results.notify:
	case job := <-l.fromCommitter:
		l.landed(job, timers)
		l.landedNow = true
	case <-l.wake:
		l.status.dirty = true
	case <-timers.round.c():
		timers.round.fired()
	case <-timers.retry.c():
		timers.retry.fired()
	case <-timers.commit.c():
		timers.commit.fired()
	case <-timers.refresh.c():
		timers.refresh.fired()
	case <-timers.health.c():
		timers.health.fired()
	case <-timers.full.c():
		timers.full.fired()
		l.full.wanted = true
	}
	return true
}

// readyToCommit reports whether finished results should be committed now
// and a commit can take them: the committer holds fewer than maxOutJobs.
func (l *loop[Obj]) readyToCommit(now time.Time, ts *loopTimers) bool {
	return l.outJobs < maxOutJobs && l.results.shouldCommit(now, l.cfg.RoundSize, ts)
}

// overlapCommit reports whether a commit's writes should go to the
// committer: work waits beyond what was picked up, and the round limiter
// lets the next round start now. When the limiter makes the next round
// wait anyway, writing right here spares the result two goroutine
// hand-offs: under a trickle of changes that is most of their latency.
func (l *loop[Obj]) overlapCommit(now time.Time) bool {
	return l.moreWaiting(now) && l.roundDelay(now) == 0
}

// moreWaiting reports whether work waits beyond what was picked up:
// changes not read yet, or retries due (a recovered target releases all
// the retries it held at once). Then a commit's writes go to the committer
// while the loop picks that work up. (The change iterator's watch channel
// cannot tell: it comes back closed after every read that found changes.)
func (l *loop[Obj]) moreWaiting(now time.Time) bool {
	return l.moreChanges || l.retryDue(now) || l.cfg.Table.Revision(l.db.ReadTxn()) > l.pulledTo
}

// budget is how many more objects may be picked up now: RoundSize less
// the busy ones, not counting those whose results are being written (they
// are done with their operations, and picking up the next round while
// they are written is the point of the committer).
func (l *loop[Obj]) budget() int {
	return l.cfg.RoundSize - len(l.busy) + l.outItems
}

// roundDelay returns how long until the round limiter allows a round. It
// reserves nothing: the round takes its token once it has picked up work.
func (l *loop[Obj]) roundDelay(now time.Time) time.Duration {
	res := l.cfg.RoundRateLimiter.ReserveN(now, 1)
	if !res.OK() {
		return 0 // a limiter with zero burst: do not block forever
	}
	d := res.DelayFrom(now)
	res.CancelAt(now)
	return d
}

func (l *loop[Obj]) retryDue(now time.Time) bool {
	next, ok := l.retries.next()
	return ok && !l.breaker.nextRetry(next).After(now)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

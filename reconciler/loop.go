package reconciler

import (
	"context"
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

// loop is one run of a per-object reconciler. Everything here is owned by
// the loop goroutine; the workers share only the executor's queues.
type loop[Obj comparable] struct {
	*reconciler[Obj]
	health cell.Health
	feed[Obj]
	work    *work[Obj]
	exec    *executor[Obj]
	backoff backoff
	breaker breaker

	// readTo is the last revision the change iterator returned: the waits
	// never claim more than was read. readAll is set once every change
	// present when the run began has been read.
	readTo  statedb.Revision
	readAll bool
	// moreChanges is set when a round stopped before reading all changes.
	moreChanges bool
	// now and roundTxn are the time and snapshot of the latest round.
	now      time.Time
	roundTxn statedb.ReadTxn

	lastRound RoundInfo
	lastFull  FullInfo
	full      fullState[Obj]
	refresh   refreshState
	status    healthState
	failLog   failureLog

	// ownChanged is Ownership.Changed's channel, taken before the owned
	// set was last looked at, so that a change meanwhile is not missed.
	ownChanged <-chan struct{}

	// nopMetrics skips timing operations nobody records.
	nopMetrics bool
	// ownWrites are the revisions of the latest status commits: their
	// Done, read back, is recognized without computing its key.
	ownWrites revRanges

	// committer writes commits' statuses while the loop reads the next
	// round (committer.go).
	committer committer[Obj]

	// ask carries Explain's questions; reportSig is Explanation.Changed.
	ask       <-chan explainRequest
	reportSig reportSignal

	// Buffers reused from step to step.
	taken    []*request[Obj]
	tasks    []task[Obj]
	results  []result[Obj]
	realized []time.Duration
}

func newLoop[Obj comparable](r *reconciler[Obj], health cell.Health) *loop[Obj] {
	l := &loop[Obj]{
		reconciler: r,
		health:     health,
		work:       newWork[Obj](true),
		backoff:    newBackoff(r.cfg.RetryBackoffMin, r.cfg.RetryBackoffMax),
		breaker:    breaker{log: r.log},
		full:       fullState[Obj]{wanted: r.cfg.FullReconciliationInterval != Off},
		status:     newHealthState(),
		failLog:    newFailureLog(r.log),
		nopMetrics: r.metrics == ReconcilerMetrics(NopMetrics{}),
	}
	l.exec = newExecutor(r.cfg.Concurrency, r.cfg.RoundSize, l.runTask)
	return l
}

// closedCh is a channel that is always ready.
var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (l *loop[Obj]) run(ctx context.Context, ask <-chan explainRequest) error {
	l.ask = ask
	if l.cfg.Ownership != nil {
		l.ownChanged = l.cfg.Ownership.Changed()
	}
	if err := l.feed.open(l.db, l.cfg.Table, l.initializerAtNew); err != nil {
		return err
	}
	l.shared.start(l.registry, l.regName, l.cfg.Table.Name())
	timers := newLoopTimers()
	defer func() {
		// Workers drop what they have not started and the running
		// operations see a cancelled context; nothing is committed.
		l.exec.close()
		l.committer.stop()
		timers.stop()
		l.changes.Close()
		l.reportSig.reported()
	}()
	for {
		now := time.Now()
		if ctx.Err() != nil {
			return nil
		}
		l.step(ctx, now, timers)
		if !l.sleep(ctx, now, timers) {
			return nil
		}
	}
}

// step does what the loop can do now, in order: commit finished results,
// start (or wait for) a full reconciliation, read a round of changes and
// due retries, hand the ready requests to the workers, refresh, report.
func (l *loop[Obj]) step(ctx context.Context, now time.Time, timers *loopTimers) {
	committed := l.commit(ctx, now, timers)
	l.stepFull(ctx, now, timers)
	pulled := l.stepRound(now, timers)
	dispatched := l.dispatch(ctx, now)
	l.stepRefresh(ctx, now, timers)
	if committed || pulled || dispatched || l.work.dirty || l.status.dirty {
		l.report(now, timers)
	}
}

// report publishes what the outstanding work says (report.go).
func (l *loop[Obj]) report(now time.Time, ts *loopTimers) {
	defer l.reportSig.reported()
	l.publish(l.work, &l.status, l.health, now, reportParts{
		readTo:      l.readTo,
		initialized: l.initialized,
		inFlight:    l.work.running,
		unowned:     len(l.work.unowned),
		ownChanged:  l.ownChanged,
		whole:       wholeError{op: "prune", err: l.full.lastErr},
		lastRound:   l.lastRound,
		lastFull:    l.lastFull,
		healthTimer: &ts.health,
	})
}

// canPull reports whether new work may be picked up: no full
// reconciliation is draining the operations, not suspended, and there is
// room in the round.
func (l *loop[Obj]) canPull() bool {
	return !l.full.draining() && !l.suspended() && l.roundRoom() > 0
}

// roundRoom is how many more requests a round may take: RoundSize less
// those queued or running. Those whose status write is out on the
// committer take no room, so that the next round is read meanwhile; nor
// do those queued behind an earlier attempt on their key, so that an
// attempt stuck past its timeout holds up its own key only.
func (l *loop[Obj]) roundRoom() int {
	return l.cfg.RoundSize - (len(l.work.active) - l.work.committing - l.work.keyBusy)
}

// stepRound picks up new work when there is room for it and something
// waits, pacing rounds with the round limiter. Only a round that picked up
// work takes a token: the reconciler's own status writes come back
// through the change iterator right after every commit, and reading them
// must not make the user's next change wait. It reports whether it read.
func (l *loop[Obj]) stepRound(now time.Time, timers *loopTimers) bool {
	if !l.canPull() || !(l.moreChanges || isClosed(l.changesWatch) || l.retryDue(now)) {
		return false
	}
	if d := l.roundDelay(now); d > 0 {
		timers.round.armAt(now.Add(d))
		return false
	}
	var picked int
	hungry := l.moreChanges
	l.changesWatch, picked = l.pull(now)
	if picked > 0 {
		l.cfg.RoundRateLimiter.AllowN(now, 1)
	}
	if l.moreChanges != hungry {
		l.exec.setHungry(l.moreChanges)
	}
	return true
}

// dispatch hands the ready requests to the workers: one task per object,
// or with BatchOperations one batch of updates and one of deletes.
func (l *loop[Obj]) dispatch(ctx context.Context, now time.Time) bool {
	if len(l.work.ready) == 0 || l.full.draining() || l.suspended() || ctx.Err() != nil {
		return false
	}
	l.taken = l.work.takeReady(l.taken)
	if len(l.taken) == 0 {
		return false
	}
	for _, r := range l.taken {
		r.startedAt, r.enteredAt = now, now
	}
	if l.full.abandoned() {
		if l.full.touched == nil {
			l.full.touched = map[string]statedb.Query[Obj]{}
		}
		for _, r := range l.taken {
			l.full.touched[r.key] = l.queryOf(r.obj)
		}
	}
	if l.cfg.BatchOperations == nil {
		l.submitEach(ctx)
	} else {
		l.submitBatches(ctx)
	}
	clear(l.taken)
	return true
}

// entry is the task entry of request r.
func (l *loop[Obj]) entry(r *request[Obj]) opEntry[Obj] {
	en := opEntry[Obj]{key: r.key, obj: r.obj, rev: r.rev, attempt: r.attempt, failures: r.attempts}
	if r.tried && !r.deleted {
		asked := r.asked // a copy: the loop may change r meanwhile
		en.asked = &asked
	}
	return en
}

// submitEach hands each taken request to the workers as a task of its own.
func (l *loop[Obj]) submitEach(ctx context.Context) {
	tasks := l.tasks[:0]
	for _, r := range l.taken {
		op := OpUpdate
		if r.deleted {
			op = OpDelete
		}
		tasks = append(tasks, task[Obj]{op: op, one: l.entry(r), txn: l.roundTxn})
	}
	seq := l.exec.submit(ctx, tasks...)
	for i, r := range l.taken {
		r.taskSeq = seq + uint64(i)
	}
	clear(tasks)
	l.tasks = tasks[:0]
}

// submitBatches hands the taken requests to the workers as one batch of
// updates and one of deletes.
func (l *loop[Obj]) submitBatches(ctx context.Context) {
	updates := task[Obj]{op: OpUpdateBatch, txn: l.roundTxn}
	deletes := task[Obj]{op: OpDeleteBatch, txn: l.roundTxn}
	for _, r := range l.taken {
		if r.deleted {
			deletes.entries = append(deletes.entries, l.entry(r))
		} else {
			updates.entries = append(updates.entries, l.entry(r))
		}
	}
	var seqs [2]uint64
	for i, t := range []task[Obj]{updates, deletes} {
		if len(t.entries) > 0 {
			seqs[i] = l.exec.submit(ctx, t)
		}
	}
	for _, r := range l.taken {
		r.taskSeq = seqs[0]
		if r.deleted {
			r.taskSeq = seqs[1]
		}
	}
}

// sleep waits until something happens. It returns false when stopping.
func (l *loop[Obj]) sleep(ctx context.Context, now time.Time, timers *loopTimers) bool {
	changesCh := l.pullChannel(timers)
	initCh, ownCh := l.eventChannels()
	select {
	case <-ctx.Done():
		return false
	case <-ownCh:
		l.ownChanged = l.cfg.Ownership.Changed() // before looking: a change meanwhile closes this one
		l.ownershipChanged()
	case <-changesCh:
	case <-initCh:
		l.initialized = true
	case <-l.triggerFull:
		l.full.wanted = true
	case <-l.exec.notify:
	case b := <-l.committer.backCh():
		l.committer.receive(b)
	case <-l.wake:
		l.status.dirty = true
	case req := <-l.ask:
		req.reply <- l.explain(req.key, time.Now())
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

// pullChannel is the changes' watch channel while a round may read them
// (nil otherwise), and arms the retry timer for the earliest retry then.
func (l *loop[Obj]) pullChannel(timers *loopTimers) <-chan struct{} {
	if !l.canPull() || timers.round.armed {
		return nil
	}
	if next, ok := l.work.nextDue(); ok {
		timers.retry.armAt(l.breaker.nextRetry(next))
	}
	return l.changesWatch
}

// eventChannels are the channels of the table's initialization (until it
// is) and of ownership changes (with Config.Ownership); nil otherwise.
func (l *loop[Obj]) eventChannels() (initCh, ownCh <-chan struct{}) {
	if !l.initialized {
		initCh = l.initWatch
	}
	return initCh, l.ownChanged
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
	next, ok := l.work.nextDue()
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

package reconciler

import (
	"context"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/clock"
	"github.com/converge-go/converge/reconciler/internal/health"
	"github.com/converge-go/converge/reconciler/internal/pipeline"
	"github.com/converge-go/converge/reconciler/internal/workers"
)

// The per-object loop. Each step, top to bottom: land the status writes
// that came back and commit the results the workers finished
// (commit.go), start or wait for a full reconciliation (full.go), read a
// round of changes and due retries into the request table (table.go),
// hand the Queued rows to the workers (execute.go), refresh (refresh.go),
// and report what the table says (report.go). Then it sleeps until
// something happens (loopwake.go). Everything here is owned by the loop
// goroutine.

// change is one change read: an object at a revision, or its deletion.
type change[Obj any] struct {
	obj     Obj
	rev     statedb.Revision
	deleted bool
}

// loop is one run of a per-object reconciler.
type loop[Obj comparable] struct {
	*reconciler[Obj]
	health cell.Health
	feed[Obj]
	t       *requests[Obj]
	exec    *workers.Pool[task[Obj], result[Obj]]
	runner  runner[Obj]
	commits *committer[Obj]
	full    *fullState[Obj]
	refresh *refresher[Obj]
	status  health.State

	// moreChanges is set when a round stopped before reading all changes;
	// hungry is what the pool was last told (updateHungry).
	moreChanges, hungry bool
	// roundTxn is the snapshot of the latest round: operations read it.
	roundTxn statedb.ReadTxn
	// ownChanged is Ownership.Changed's channel, taken before the owned
	// set was last looked at, so that a change meanwhile is not missed.
	ownChanged <-chan struct{}

	// ask carries Explain's questions; reportSig is Explanation.Changed.
	ask       <-chan explainRequest
	reportSig reportSignal

	// Buffers reused from step to step.
	taken   []*request[Obj]
	tasks   []task[Obj]
	results []result[Obj]
}

// loopTimers are the loop's wake-ups that are not channels of their own.
type loopTimers struct {
	round   clock.Timer // the round limiter allows the next round
	retry   clock.Timer // the earliest retry is due
	commit  clock.Timer // finished results have waited long enough
	full    clock.Timer // the next periodic full reconciliation
	refresh clock.Timer // refresh is due, or its limiter allows more
	health  clock.Timer // a postponed health report is due
}

func newLoop[Obj comparable](r *reconciler[Obj], hc cell.Health) *loop[Obj] {
	l := &loop[Obj]{reconciler: r, health: hc, t: r.newRequests(true), status: health.New()}
	l.runner = runner[Obj]{reconciler: r, nopMetrics: r.metrics == ReconcilerMetrics(NopMetrics{})}
	l.exec = workers.New(r.cfg.Concurrency, r.cfg.RoundSize, l.runner.runTask, overdue[Obj])
	l.t.order = newOrdering(r.cfg)
	if l.t.order != nil {
		l.exec.SetOrdered(max(1, orderedLookahead(r.cfg.Concurrency)/2))
	}
	l.commits = newCommitter(r, l.t, &l.status)
	l.commits.pipe = pipeline.New[*commitJob[Obj]](maxOutJobs)
	l.full = &fullState[Obj]{reconciler: r, t: l.t, exec: l.exec, wanted: r.cfg.FullReconciliationInterval != Off}
	l.refresh = &refresher[Obj]{reconciler: r, t: l.t}
	if r.cfg.Ownership != nil {
		l.t.owns = r.ownsKey
	}
	l.t.deps = depGraphOf(r)
	l.t.obs = r.obs
	return l
}

func (l *loop[Obj]) run(ctx context.Context, ask <-chan explainRequest) error {
	l.ask = ask
	if l.cfg.Ownership != nil {
		l.ownChanged = l.cfg.Ownership.Changed()
	}
	start, err := l.feed.open(l.db, l.cfg.Table, l.initializerAtNew)
	if err != nil {
		return err
	}
	if err := l.t.deps.openNeeds(func(n need[Obj]) (needFeed, error) { return n.open(l.db) }); err != nil {
		l.changes.Close()
		return err
	}
	l.t.seedAll(l.cfg.Table.All(start))
	l.shared.start(l.registry, l.regName, l.cfg.Table.Name())
	watchWrites(l.reconciler, l.t, &l.feed)
	// The round limiter's waits are a millisecond or less, and every
	// change that comes while rounds are paced waits one: a fine timer.
	timers := &loopTimers{round: clock.Timer{Fine: true}}
	defer func() {
		// Workers drop what they have not started and the running
		// operations see a cancelled context; nothing is committed. One
		// that ignores its context is waited for only so long (stop.go).
		l.exec.Close()
		l.awaitStop(func(wait context.Context) []string { return l.exec.Wait(wait, describeTask[Obj]) })
		l.commits.pipe.Stop()
		for _, t := range []*clock.Timer{&timers.round, &timers.retry, &timers.commit, &timers.full, &timers.refresh, &timers.health} {
			t.Close()
		}
		l.changes.Close()
		l.t.deps.closeNeeds()
		l.reportSig.reported()
	}()
	for ctx.Err() == nil {
		now := time.Now()
		l.step(ctx, now, timers)
		if !l.sleep(ctx, timers) {
			break
		}
	}
	return nil
}

// step does what the loop can do now, in order.
func (l *loop[Obj]) step(ctx context.Context, now time.Time, ts *loopTimers) {
	l.t.deps.fresh()
	l.t.pullNeeds(now)
	committed := l.commit(ctx, now, ts)
	if l.full.repairDue() {
		// After this step's results landed, the inline commit's too: a
		// key whose Done is in the table now needs no other wake-up.
		l.full.repair(now)
	}
	l.full.step(ctx, now, &l.feed, &ts.full)
	pulled := l.stepRound(now, ts)
	dispatched := l.dispatch(ctx, now)
	l.refresh.step(ctx, now, l.readTo, &ts.refresh)
	if committed || pulled || dispatched || l.t.dirty || l.status.Dirty {
		l.report(now, ts)
	}
	l.t.shrink()
}

// commit lands the status writes the committer handed back, then, when
// it is time, takes the workers' results and commits them: a prune's goes
// to the full reconciliation, each object's to the committer. It reports
// whether it did anything.
func (l *loop[Obj]) commit(ctx context.Context, now time.Time, ts *loopTimers) bool {
	did := l.commits.land(now)
	if !l.commits.hasRoom() {
		return did // every commit is out: the results wait their turn
	}
	ok, wait := l.exec.ShouldCommit(now, l.cfg.RoundSize)
	if !ok && !l.commits.heldDue(now) && !l.t.cyclicDue() {
		if wait > 0 {
			ts.commit.ArmAt(now.Add(wait))
		}
		return did
	}
	ts.commit.Disarm()
	job := l.commits.newJob(now)
	l.results = l.exec.Take(l.results)
	for i := range l.results {
		res := &l.results[i]
		if res.op == OpPrune {
			l.full.done(res, now, &ts.full)
		} else if o, ok := l.commits.outcome(res, now); ok {
			l.commits.judgeInto(job, &o, now)
		}
	}
	clear(l.results)
	l.commits.failCycles(job, now)
	// While more work waits (a round stopped short, ordered rows queued,
	// retries due) it goes to the committer's goroutine, or waits until at.
	if at := l.commits.commit(ctx, job, l.moreChanges || l.hungry || l.retryDue(now), now); !at.IsZero() {
		ts.commit.ArmAt(at)
	}
	return true
}

// canPull reports whether new work may be picked up: no full
// reconciliation drains the operations, not suspended, room in the round.
func (l *loop[Obj]) canPull() bool {
	return !l.full.draining() && !l.suspended() && l.roundRoom() > 0
}

// stepRound picks up new work when there is room for it and something
// waits, pacing rounds with the round limiter. Only a round that picked up
// work takes a token: the reconciler's own status writes come back
// through the change iterator after every commit, and reading them must
// not make the user's next change wait. It reports whether it read.
func (l *loop[Obj]) stepRound(now time.Time, ts *loopTimers) bool {
	if !l.canPull() || !(l.moreChanges || isClosed(l.changesWatch) || l.retryDue(now)) || l.intakeWaits() {
		return false
	}
	// Ordered mode reads on unpaced: its reads only fill the queue, and a
	// change waits to be read until everything before it has been.
	paced := l.t.order == nil
	txn, echo := l.db.ReadTxn(), false
	if d := l.roundDelay(now); paced && d > 0 {
		if !l.echoOnly(txn) {
			ts.round.ArmAt(now.Add(d))
			return false
		}
		// Nothing but the reconciler's own status writes is unread (the
		// echo of the commit that followed the last round): reading them
		// picks up no work, and pacing the read would cost a wake-up of
		// its own a change. No retries ride along.
		echo = true
	}
	if l.pull(txn, now, !echo) > 0 && paced {
		l.cfg.RoundRateLimiter.AllowN(now, 1)
	}
	l.updateHungry()
	l.yieldIntake()
	return true
}

// echoOnly reports whether every change of txn not read yet is one of
// this reconciler's own status writes.
func (l *loop[Obj]) echoOnly(txn statedb.ReadTxn) bool {
	l.commits.ownWrites()
	rev := l.cfg.Table.Revision(txn)
	return rev > l.readTo && l.commits.own.Covers(l.readTo+1, rev)
}

// pull is a round: the changes since the last one up to txn, in revision
// order and deletes included, then (with retries) the retries that are
// due, at most roundRoom requests in all. It returns how many it queued:
// a round that queued none read only status writes (most often the
// reconciler's own).
func (l *loop[Obj]) pull(txn statedb.ReadTxn, now time.Time, retries bool) int {
	l.roundTxn = txn
	// Every write of the committer's this snapshot holds was published
	// before it was committed.
	l.commits.ownWrites()
	budget, picked := l.roundRoom(), 0
	seq, watch := l.changes.Next(txn)
	l.changesWatch, l.moreChanges = watch, false
	// The iterator yields each object once, at its newest revision: a
	// request it carries may have been written at any revision after what
	// earlier rounds read, and the waits count it from there. A change
	// the sequence yields is consumed, so stop right after the one that
	// used the last of the budget.
	askedAt := l.readTo + 1
	for ch, rev := range seq {
		l.readTo = rev
		if l.t.read(change[Obj]{obj: ch.Object, rev: ch.Revision, deleted: ch.Deleted}, &l.commits.own, askedAt, l.startRev, now) {
			picked++
			if budget--; budget == 0 {
				l.moreChanges = true
				break
			}
		}
	}
	if !l.moreChanges {
		l.changesWatch = rearm(l.changes, txn, l.changesWatch)
	}
	l.markRead(!l.moreChanges)
	l.commits.own.ReadPast(l.readTo)
	if l.moreChanges && l.t.order != nil {
		picked += l.readAhead(txn, now) // what the order takes first, read before the backlog
	} else if !l.moreChanges {
		l.t.order.caughtUp()
	}
	if !retries {
		return picked
	}
	for n := l.commits.breaker.AllowRetries(now, budget); n > 0; n-- {
		r, ok := l.t.popDue(now)
		if !ok {
			break
		}
		if l.onRetry(txn, r, now) {
			picked++
		}
	}
	return picked
}

// onRetry queues a due retry, unless the object moved on meanwhile: then
// the change iterator delivers what supersedes it.
func (l *loop[Obj]) onRetry(txn statedb.ReadTxn, r *request[Obj], now time.Time) bool {
	cur, rev, found := l.cfg.Table.Get(txn, l.queryOf(r.obj))
	switch {
	case r.deleted == found, found && l.cfg.GetObjectStatus(cur).Kind == StatusKindUnset:
		// Inserted again (for a failed delete), deleted (for an update),
		// or made Unset, by a change not read yet: withdrawn now.
		l.t.settle(r)
		return false
	case found:
		// Operate on the object as it is now: the status write that
		// moved its revision may have carried newer data.
		r.obj, r.rev = cur, rev
	}
	l.t.requeue(r, now)
	return true
}

// dispatch hands the Queued rows to the workers: one task per object, or
// with BatchOperations one batch of updates and one of deletes.
func (l *loop[Obj]) dispatch(ctx context.Context, now time.Time) bool {
	if l.t.n[stQueued] == 0 || l.full.draining() || l.suspended() || ctx.Err() != nil {
		return false
	}
	l.taken = takeReady(l.t, l.taken, l.handOutRoom(), now)
	if len(l.taken) == 0 {
		return false
	}
	l.full.touch(l.taken)
	tasks := l.runner.tasks(l.tasks[:0], l.taken, l.roundTxn, l.cfg.BatchOperations != nil)
	seq := l.exec.Submit(ctx, tasks...)
	for i, r := range l.taken {
		r.taskSeq = seq + uint64(taskOf(tasks, i, r.deleted))
	}
	clear(tasks)
	l.tasks = tasks[:0]
	clear(l.taken)
	l.updateHungry()
	return true
}

// updateHungry tells the workers' pool whether more work waits than it
// was handed (a round stopped short, or ordered Queued rows): then a
// worker left without a task is a reason to commit, and hand out more.
func (l *loop[Obj]) updateHungry() {
	if h := l.moreChanges || l.t.order != nil && l.t.n[stQueued] > 0; h != l.hungry {
		l.hungry = h
		l.exec.SetHungry(h)
	}
}

// roundDelay returns how long until the round limiter allows a round.
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
	next, ok := l.t.nextDue()
	return ok && !l.commits.breaker.NextRetry(next).After(now)
}

// report publishes what the request table says (report.go).
func (l *loop[Obj]) report(now time.Time, ts *loopTimers) {
	defer l.reportSig.reported()
	publish(l.reconciler, l.t, &l.status, l.health, now, reportParts{
		readTo:      l.readTo,
		initialized: l.initialized,
		inFlight:    l.exec.Executing(),
		stuck:       l.exec.Stuck(),
		ownChanged:  l.ownChanged,
		whole:       health.Whole{Op: "prune", Err: l.full.lastErr},
		lastRound:   l.commits.lastRound,
		lastFull:    l.full.last,
		prunedTo:    l.full.prunedTo,
		healthTimer: &ts.health,
	})
}

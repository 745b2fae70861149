package reconciler

import (
	"fmt"
	"runtime"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler/internal/order"
)

// Ordered mode (Config.Priority, FairnessKey, TargetKey): the per-object
// loop reads every change into the request table, orderedIntake a step
// (up to maxOrderedRows rows with work; while it is behind, what the order
// takes first is read ahead of the rest, readAhead; with more workers than
// processors it gives way to them between steps and while a commit is
// out, yieldIntake and intakeWaits) and hands the Queued rows
// to the workers in the Config's order (internal/order): by priority,
// then new changes before retries before refreshes, round-robin across
// fairness keys and targets, with aging: once a row has waited MaxWait,
// none that became ready after it goes first. A target at
// TargetConcurrency is passed over; its rows wait without taking room in
// a round. Without these options the FIFO ready list of request.go is
// used, unchanged.

// maxOrderedRows bounds the rows with work an ordered loop keeps (the
// rest of a backlog waits unread): a million rows are a few hundred MB.
const maxOrderedRows = 1 << 20

// orderedIntake is how many changes an ordered loop reads a step while a
// backlog waits unread. Reading is its costliest work (a row, a queue
// entry, a few allocations each, 2-8µs apiece while a burst's inserts and
// the GC share the processors): in larger steps the results, commits and
// dispatches of the changes already read wait for it, and the change of
// a high priority with them (benchmarks/README.md, startup+changes).
const orderedIntake = 128

// intakeShares reports whether an ordered loop with a backlog left
// unread shares the processors with more workers than there are
// processors: then its reads give way to them (yieldIntake, intakeWaits).
// With as many processors as workers, one is free anyway.
func (l *loop[Obj]) intakeShares() bool {
	return l.t.order != nil && l.moreChanges && l.cfg.Concurrency > runtime.GOMAXPROCS(0)
}

// yieldIntake, after a step that read and left more unread (ordered mode
// reads on unpaced), lets the goroutines waiting for a processor run
// before the loop reads on: a worker whose operation returned would
// otherwise wait for the scheduler to preempt the loop, 10ms or more, and
// the result with it.
func (l *loop[Obj]) yieldIntake() {
	if l.intakeShares() {
		runtime.Gosched()
	}
}

// intakeWaits reports whether the loop is to read no more of a backlog
// until the commit out on the committer has landed. A yield does not
// free the loop's processor: the loop is the next goroutine it runs, and
// a processor takes over another's ready goroutines only when it has
// none of its own. The committer, made ready where the table's write
// lock was released (by a writer inserting the backlog, which does not
// stop), waited there 20 ms and more while the loop read on (a runtime
// trace of noisy-tenant, benchmarks/README.md): the loop parks instead,
// until the commit lands, and its processor runs the committer and the
// workers.
func (l *loop[Obj]) intakeWaits() bool {
	return l.intakeShares() && l.commits.pipe != nil && l.commits.pipe.Out() > 0
}

// roundRoom is how many more requests a round may read: RoundSize less
// the Queued and Running rows. Committing rows take no room, so that the
// next round is read while their statuses are written; nor do Busy ones,
// so that an attempt stuck past its timeout holds up its own key only.
// Ordered mode reads every change, orderedIntake a step (order.go).
func (l *loop[Obj]) roundRoom() int {
	waiting := l.t.n[stQueued] + l.t.n[stRunning]
	if l.t.order != nil {
		return min(maxOrderedRows-waiting, l.cfg.RoundSize, orderedIntake)
	}
	return l.cfg.RoundSize - waiting
}

// handOutRoom is how many Queued rows a dispatch may hand the workers:
// a round's worth, and in ordered mode no more than keep a few tasks
// queued beyond the workers (orderedLookahead), so that the order
// decides what runs next.
func (l *loop[Obj]) handOutRoom() int {
	n := l.cfg.RoundSize - l.t.n[stRunning]
	if l.t.order == nil {
		return n
	}
	return min(n, l.cfg.Concurrency+orderedLookahead(l.cfg.Concurrency)-l.exec.Outstanding())
}

// orderedLookahead is how many tasks beyond its workers an ordered loop
// keeps queued for them: enough that a worker rarely waits for the loop,
// few enough that a row of higher priority, once ready, waits for few to
// start before it. The pool wakes the loop when half of them are gone.
func orderedLookahead(concurrency int) int { return max(2, concurrency/4) }

// ordering is the ordered mode of a request table.
type ordering[Obj any] struct {
	q        *order.Queue[*request[Obj]]
	priority func(Obj) int
	fair     func(Obj) string
	target   func(Obj) string
	cap      int
	maxWait  time.Duration
	running  map[string]int // operations in flight, by target
	// The Queued rows by askedAt, and those not attempted yet: the
	// reports' watermarks (view), which active gives in FIFO mode.
	marks waitingHeaps[Obj]
	// aheadTo is the last revision readAhead looked at; unread what it
	// looked at and left for the reader.
	aheadTo statedb.Revision
	unread  order.Unread
}

// newOrdering returns the ordering cfg asks for, or nil (FIFO).
func newOrdering[Obj comparable](cfg Config[Obj]) *ordering[Obj] {
	if !cfg.ordered() {
		return nil
	}
	o := &ordering[Obj]{
		q: order.New(cfg.MaxWait, func(r *request[Obj], gen uint32) bool {
			return r.gen == gen && r.state == stQueued
		}),
		priority: cfg.Priority, fair: cfg.FairnessKey, target: cfg.TargetKey, maxWait: cfg.MaxWait,
		cap: cfg.TargetConcurrency, running: map[string]int{},
	}
	o.marks.init()
	return o
}

// push queues r, just made Queued at now.
func (o *ordering[Obj]) push(r *request[Obj], now time.Time) {
	o.q.Push(order.Entry[*request[Obj]]{Item: r, Gen: r.gen, Priority: o.priorityOf(r.obj), Class: classOf(r),
		Fair: o.fairOf(r.obj), Target: o.targetOf(r.obj), At: now})
	o.marks.push(r)
}

// remove takes r, leaving Queued, out of the heaps; its entry in the
// queue goes stale (the queue drops it when met).
func (o *ordering[Obj]) remove(r *request[Obj]) {
	o.marks.remove(r)
}

// view adds the Queued rows to v, which walked active. A row counts as
// waiting from when it became ready (since), which is when it was queued
// unless it waited Busy first.
func (o *ordering[Obj]) view(v *tableView[Obj]) {
	o.marks.view(v)
	if at, ok := o.q.OldestAt(); ok && at.Before(v.oldestPicked) {
		v.oldestPicked = at
	}
}

// classOf is r's place among requests of one priority: new changes (0),
// then retries (1), then refreshes (2).
func classOf[Obj any](r *request[Obj]) int {
	switch {
	case r.asked.Kind == StatusKindRefreshing:
		return 2
	case r.tried:
		return 1
	}
	return 0
}

func (o *ordering[Obj]) priorityOf(obj Obj) int {
	if o.priority == nil {
		return 0
	}
	return o.priority(obj)
}

func (o *ordering[Obj]) fairOf(obj Obj) string {
	if o.fair == nil {
		return ""
	}
	return o.fair(obj)
}

func (o *ordering[Obj]) targetOf(obj Obj) string {
	if o.target == nil {
		return ""
	}
	return o.target(obj)
}

// lone reports whether r, taken from the queue, was the last of its kind
// (priority, class and fairness key) there, not one of a burst: a single
// change ahead of a backlog, or a quiet tenant's beside a busy one. Its
// status is written at once (ordering.holds).
func (o *ordering[Obj]) lone(r *request[Obj]) bool {
	return o != nil && o.q.Lone(o.priorityOf(r.obj), classOf(r), o.fairOf(r.obj))
}

// holds reports whether job waits for more results before it is written
// (committer.commit), backlog telling whether more work waits.
// The ordered loop takes results as they come: while a backlog waits,
// most of its commits would write one or two statuses, and each write
// transaction copies statedb's tree paths anew, ten times the allocations
// per status of a round's commit, and as many more GC cycles, which slow
// every change (benchmarks/README.md, startup+changes). So a commit of
// the backlog's statuses alone waits until it holds RoundSize of them or
// its first is CommitDelay old; one with the result of a lone request
// (lone) is written at once.
func (o *ordering[Obj]) holds(job *commitJob[Obj], backlog bool, roundSize int, now time.Time) bool {
	return o != nil && backlog && !job.urgent && len(job.writes) > 0 &&
		len(job.writes) < roundSize && now.Before(job.holdUntil())
}

// capped reports whether target's operations in flight are at the cap.
func (o *ordering[Obj]) capped(target string) bool {
	return o.target != nil && o.running[target] >= o.cap
}

// pop takes the next Queued row to run, or reports false.
func (o *ordering[Obj]) pop(now time.Time) (*request[Obj], bool) {
	e, ok := o.q.Pop(now, o.capped)
	if !ok {
		return nil, false
	}
	if o.target != nil {
		e.Item.runTarget = e.Target
		o.running[e.Target]++
	}
	return e.Item, true
}

// release records that the attempt r ran for its target returned.
func (o *ordering[Obj]) release(r *request[Obj]) {
	if o.target == nil {
		return
	}
	if o.running[r.runTarget]--; o.running[r.runTarget] <= 0 {
		delete(o.running, r.runTarget)
	}
	r.runTarget = ""
}

// why says where a Queued row waits in the order at now, for Explain.
func (o *ordering[Obj]) why(r *request[Obj], now time.Time) string {
	prio, class, target := o.priorityOf(r.obj), classOf(r), o.targetOf(r.obj)
	if o.capped(target) {
		return fmt.Sprintf("waiting for target %q at its cap (%d running)", target, o.running[target])
	}
	higher, overdue, late := o.q.Ahead(prio, class, r.since, now, func(x *request[Obj]) bool { return x == r }, o.capped)
	switch {
	case late:
		return fmt.Sprintf("waited past MaxWait (%s): taken before every request that became ready after it; %d that waited longer go first",
			roundDur(o.maxWait), overdue)
	case higher > 0 || overdue > 0:
		return fmt.Sprintf("waiting behind %d request(s) of higher priority or earlier class and %d past MaxWait (its priority %d)",
			higher, overdue, prio)
	case o.fair != nil:
		return fmt.Sprintf("waiting for its turn among fairness keys (priority %d, fairness key %q)", prio, o.fairOf(r.obj))
	}
	return fmt.Sprintf("waiting for its turn (priority %d)", prio)
}

// waits lists, highest priority first, how long the longest-waiting ready
// row of each priority has waited.
func (o *ordering[Obj]) waits(now time.Time) []ReadyWait {
	var out []ReadyWait
	o.q.Oldest(now, func(p int, d time.Duration) { out = append(out, ReadyWait{Priority: p, Oldest: d}) })
	return out
}

// ordered reports whether requests are taken in an order of the Config's
// (Priority, FairnessKey, TargetKey) rather than as they came.
func (cfg Config[Obj]) ordered() bool {
	return cfg.Priority != nil || cfg.FairnessKey != nil || cfg.TargetKey != nil
}

// validateOrder checks the ordering fields of a per-object Config, before
// the defaults are filled in.
func (cfg Config[Obj]) validateOrder(bad func(string) error) error {
	switch {
	case cfg.MaxWait < 0:
		return bad(fmt.Sprintf("Config.MaxWait must be positive, got %s", cfg.MaxWait))
	case cfg.MaxWait != 0 && !cfg.ordered():
		return bad("Config.MaxWait applies only with Config.Priority, Config.FairnessKey or Config.TargetKey")
	case cfg.TargetConcurrency < 0:
		return bad(fmt.Sprintf("Config.TargetConcurrency must not be negative, got %d", cfg.TargetConcurrency))
	case cfg.TargetConcurrency != 0 && cfg.TargetKey == nil:
		return bad("Config.TargetConcurrency applies only with Config.TargetKey")
	}
	return nil
}

// takeReady returns the Queued rows that may run, each now Running under a
// new attempt id: in arrival order, or (ordered mode) at most n of them
// in the Config's order.
func takeReady[Obj any](t *requests[Obj], buf []*request[Obj], n int, now time.Time) []*request[Obj] {
	buf = buf[:0]
	start := func(r *request[Obj]) {
		if t.deps != nil && t.gateAgain(r) {
			// A dependency changed since r was queued: it waits again.
			if t.order != nil {
				t.order.release(r) // popped: its target counted it
			}
			t.move(r, stBlocked, whyNone, r.err, time.Time{}, now)
			return
		}
		if t.deps != nil && !r.deleted {
			t.depApply(r.key, t.deps.depsOfRow(r)) // the target may hold it from now on
		}
		t.lastAttempt++
		r.attempt, r.running = t.lastAttempt, t.lastAttempt
		t.executing++
		r.startedAt = now
		t.move(r, stRunning, whyNone, r.err, time.Time{}, now)
		buf = append(buf, r)
	}
	if t.order != nil {
		for ; n > 0; n-- {
			r, ok := t.order.pop(now)
			if !ok {
				break
			}
			start(r)
		}
		return buf
	}
	for _, e := range t.ready {
		if r := e.r; r.gen == e.gen && r.state == stQueued { // else replaced, settled or queued again since
			start(r)
		}
	}
	clear(t.ready)
	t.ready = t.ready[:0]
	return buf
}

// readAhead, while the change reader is behind (a backlog ahead of it),
// looks at the objects written since it last looked for changes the
// order takes before a row that waits, and reads them now: a change of a
// high priority, or of a quiet fairness key, written behind a burst of
// 100k objects would otherwise wait until the whole burst has been read.
// Each revision is looked at once, and judged against the rows queued and
// those it looked at and left unread before it (they are queued before
// the reader reaches it), so that the judgement holds as the reader reads
// on. The change reader meets a change read ahead again, at the same
// revision, as the request the table has; deletes wait for it.
func (l *loop[Obj]) readAhead(txn statedb.ReadTxn, now time.Time) int {
	o, picked, askedAt := l.t.order, 0, l.readTo+1
	for obj, rev := range l.cfg.Table.LowerBound(txn, statedb.ByRevision[Obj](max(o.aheadTo, l.readTo)+1)) {
		o.aheadTo = rev
		st := l.t.statusOf(obj)
		if !st.IsPendingOrRefreshing() {
			continue
		}
		prio, fair := o.priorityOf(obj), o.fairOf(obj)
		if !o.q.Passes(prio, fair, &o.unread) {
			o.unread.Add(prio, 2*b2i(st.Kind == StatusKindRefreshing), fair)
		} else if l.t.read(change[Obj]{obj: obj, rev: rev}, &l.commits.own, askedAt, l.startRev, now) {
			picked++
		}
	}
	return picked
}

// caughtUp records that the reader has read everything written: what
// readAhead left unread is read.
func (o *ordering[Obj]) caughtUp() {
	if o != nil {
		o.unread.Reset()
	}
}

package reconciler

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/converge-go/converge/reconciler/internal/workers"
)

// How the engine tells its observers (observe.go): one observing per
// reconciler, nil without Config.Observers, so that every hook costs one
// nil check when nobody observes. The hooks sit where the things happen:
// entered under every state change of the request table (read, ready),
// attempt and finished around an operation on its worker, settled where a
// result moves its request on (committed), failed in failure.go. The
// metrics, the failure log and health are not observers: they are told on
// the same paths without an Event being built, so that the default (a
// module's metrics, no observers) costs what it cost before, and the
// failure log's pacing keeps its state in the request's row.

// observing is a reconciler's observers and what it knows to fill events.
type observing[Obj any] struct {
	list  []observerEntry
	wants kindSet // the kinds any observer wants
	// The attempt filters (observe_attempt.go): who asks, and per kind
	// the observers (of the first 64) that want it and those after them.
	filters []attemptAsker
	byKind  [EventReleased + 1]obsMask
	tail    kindSet
	log     *slog.Logger
	sink    ObserverMetrics // nil when the metrics do not record observers
	logged  atomic.Bool     // the first panic was logged

	priority func(Obj) int
	target   func(Obj) string
}

// observerEntry is one observer, and its offer when it is a buffer that
// says whether an event fitted (Subscription).
type observerEntry struct {
	o     Observer
	offer func(Event) bool
	wants kindSet
}

// kindSet is a set of EventKinds.
type kindSet uint32

func (s kindSet) has(k EventKind) bool { return s&(1<<k) != 0 }

// offerer is an observer that hands events over without blocking and
// reports whether one fitted (false: dropped, counted in the metrics).
type offerer interface {
	offer(e Event) bool
}

// newObserving returns cfg's observers, or nil when there are none.
func newObserving[Obj any](cfg *Config[Obj], log *slog.Logger, m ReconcilerMetrics) *observing[Obj] {
	if len(cfg.Observers) == 0 {
		return nil
	}
	o := &observing[Obj]{log: log, priority: cfg.Priority, target: cfg.TargetKey}
	o.sink, _ = m.(ObserverMetrics)
	for _, ob := range cfg.Observers {
		e := observerEntry{o: ob, wants: ^kindSet(0)}
		if off, ok := ob.(offerer); ok {
			e.offer = off.offer
		}
		if f, ok := ob.(EventFilter); ok {
			e.wants = 0
			for k := EventRead; k <= EventReleased; k++ {
				if f.Wants(k) {
					e.wants |= 1 << k
				}
			}
		}
		o.wants |= e.wants
		o.add(len(o.list), ob, e.wants)
		o.list = append(o.list, e)
	}
	return o
}

// emit tells every observer that wants it of e (a pointer, so that the
// event is copied once per observer, not once per call).
func (o *observing[Obj]) emit(e *Event) { o.emitTo(e, 0) }

// emitTo tells e to every observer that wants its kind, but those that
// declined its attempt (declined: their bits).
func (o *observing[Obj]) emitTo(e *Event, declined obsMask) {
	for i := range o.list {
		if o.list[i].wants.has(e.Kind) && (i >= maskBits || declined&(1<<i) == 0) {
			o.tell(&o.list[i], e)
		}
	}
}

// tell gives e to one observer, recovering its panic.
func (o *observing[Obj]) tell(ob *observerEntry, e *Event) {
	defer func() {
		if p := recover(); p != nil {
			o.panicked(p)
		}
	}()
	if ob.offer == nil {
		ob.o.Observe(*e)
		return
	}
	if !ob.offer(*e) && o.sink != nil {
		o.sink.ObserverDropped(1)
	}
}

// panicked counts an observer's panic and logs the first.
func (o *observing[Obj]) panicked(p any) {
	if o.sink != nil {
		o.sink.ObserverPanicked()
	}
	if !o.logged.Swap(true) {
		o.log.Error("Observer panicked; recovered (the event is lost to it; later panics are counted, not logged)",
			"panic", fmt.Sprint(p))
	}
}

// entered is called as request r enters state s, before r.state changes:
// a request made (from no state) or a retry come due is read; a Queued
// one is ready.
// Events carry the time they are told at, not the loop step's: a step's
// time is older than a worker's event the step acts on.
func (o *observing[Obj]) entered(r *request[Obj], s reqState) {
	if o != nil && o.wants&(1<<EventRead|1<<EventReady) != 0 && r.detail != nil && (s == stQueued || s == stBusy || s == stBlocked) {
		o.enter(r, s)
	}
}

func (o *observing[Obj]) enter(r *request[Obj], s reqState) {
	e := Event{Key: r.key, Time: time.Now(), Revision: r.rev, Deleted: r.deleted, Attempt: r.attempts + 1}
	switch r.state {
	case reqStateCount:
		e.Kind, e.Why, e.RequestedAt = EventRead, readClass(r), r.requestedAt
		o.emit(&e)
	case stRetrying:
		e.Kind, e.Why = EventRead, ReadRetry
		o.emit(&e)
	}
	if s == stQueued && o.wants.has(EventReady) {
		e.Kind, e.Why, e.RequestedAt = EventReady, 0, time.Time{}
		o.emit(&e)
	}
}

// readClass is why r was made, as the waiting order classes it: a
// change, a delete, a refresh, or a retry (an attempt failed before).
func readClass[Obj any](r *request[Obj]) ReadWhy {
	switch {
	case r.deleted:
		return ReadDelete
	case r.asked.Kind == StatusKindRefreshing:
		return ReadRefresh
	case r.tried || r.attempts > 0:
		return ReadRetry
	}
	return ReadChange
}

// attempt tells of an attempt on en starting on a worker, and returns the
// time it started (zero when no observer wants its started or finished
// event) and the observers that declined it (AttemptFilter).
func (o *observing[Obj]) attempt(ctx context.Context, op Op, en *opEntry[Obj]) (time.Time, obsMask) {
	var declined obsMask
	if o.filters != nil {
		declined = o.ask(op, en)
	}
	if !o.wantsOf(EventStarted, declined) {
		if o.wantsOf(EventFinished, declined) {
			return time.Now(), declined
		}
		return time.Time{}, declined
	}
	e := Event{Kind: EventStarted, Key: en.key, Time: time.Now(), Revision: en.rev, Deleted: op == OpDelete || op == OpDeleteBatch,
		Attempt: en.failures + 1, Op: op, Worker: workers.ID(ctx), Why: en.class, QueuedAt: time.Unix(0, en.queuedAt)}
	if o.priority != nil && !e.Deleted {
		e.Priority = o.priority(en.obj)
	}
	if o.target != nil {
		e.Target = o.target(en.obj)
	}
	o.emitTo(&e, declined)
	return e.Time, declined
}

// finished tells of an attempt on en that returned err, started at start,
// and returns when it finished (zero when nobody wants to know); declined
// is what attempt returned.
func (o *observing[Obj]) finished(op Op, en *opEntry[Obj], res Result, err error, start time.Time, declined obsMask) time.Time {
	if !o.wantsOf(EventFinished, declined) {
		return time.Time{}
	}
	now := time.Now()
	e := Event{Kind: EventFinished, Key: en.key, Time: now, Revision: en.rev, Deleted: op == OpDelete || op == OpDeleteBatch,
		Attempt: en.failures + 1, Op: op, Result: res, Duration: now.Sub(start), Err: err}
	o.emitTo(&e, declined)
	return now
}

// settled is called as a result moves its request on: its status write
// (w; nil when it had none) went as it went, in the write transaction
// committed at committedAt, which is the event's time (a clock read
// saved on the busiest path).
func (o *observing[Obj]) settled(v *verdict[Obj], w *statusWrite[Obj], committedAt time.Time) {
	if o == nil || !o.wantsOf(EventCommitted, v.declined) {
		return
	}
	r := v.r
	at := committedAt
	if w == nil || at.IsZero() {
		at = time.Now()
	}
	e := Event{Kind: EventCommitted, Key: r.key, Time: at, Revision: r.rev, Deleted: r.deleted,
		Attempt: r.attempts + 1, Op: v.op, Commit: CommitNothing, Status: StatusKindDone}
	switch {
	case w != nil && w.outcome == writeLanded:
		e.Commit = CommitWritten
	case w != nil:
		e.Commit = CommitDropped
	}
	switch {
	case v.failed != nil:
		e.Status, e.Err = StatusKindError, v.failed
	case isDeferral(v.err):
		e.Status = StatusKindPending
	}
	o.emitTo(&e, v.declined)
}

// failed is called once a failed attempt is retried (due) or given up on
// (due zero); r.attempts counts it.
func (o *observing[Obj]) failed(r *request[Obj], err error, due time.Time) {
	if o == nil || o.wants&(1<<EventFailed|1<<EventGivenUp) == 0 {
		return
	}
	e := Event{Kind: EventFailed, Key: r.key, Time: time.Now(), Revision: r.rev, Deleted: r.deleted, Attempt: r.attempts, Err: err, Due: due}
	o.emit(&e)
	if due.IsZero() {
		e.Kind, e.Due = EventGivenUp, time.Time{}
		o.emit(&e)
	}
}

// blocked and released are the hooks of dependencies (EventBlocked,
// EventReleased), for the transitions that block a request on a
// dependency (why names it) and release it once the dependency is Done:
// one call each where the request table makes them.
func (o *observing[Obj]) blocked(r *request[Obj], why error) {
	if o == nil || !o.wants.has(EventBlocked) {
		return
	}
	e := Event{Kind: EventBlocked, Key: r.key, Time: time.Now(), Revision: r.rev, Deleted: r.deleted, Attempt: r.attempts + 1, Err: why}
	o.emit(&e)
}

func (o *observing[Obj]) released(r *request[Obj]) {
	if o == nil || !o.wants.has(EventReleased) {
		return
	}
	e := Event{Kind: EventReleased, Key: r.key, Time: time.Now(), Revision: r.rev, Deleted: r.deleted, Attempt: r.attempts + 1}
	o.emit(&e)
}

// syncStarted and syncFinished tell of a whole Sync on its goroutine.
func (o *observing[Obj]) syncStarted(objects, attempt int) time.Time {
	now := time.Now()
	e := Event{Kind: EventStarted, Time: now, Op: OpSync, Objects: objects, Attempt: attempt}
	o.emit(&e)
	return now
}

func (o *observing[Obj]) syncFinished(objects, attempt int, res Result, err error, start time.Time) {
	now := time.Now()
	e := Event{Kind: EventFinished, Time: now, Op: OpSync, Objects: objects, Attempt: attempt,
		Result: res, Duration: now.Sub(start), Err: err}
	o.emit(&e)
}

// validObservers refuses a nil entry of Config.Observers.
func validObservers(list []Observer) error {
	for i, o := range list {
		if o == nil {
			return fmt.Errorf("%w: Config.Observers[%d] is nil", ErrInvalidConfig, i)
		}
	}
	return nil
}

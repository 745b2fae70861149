package reconciler

import (
	"time"

	"github.com/cilium/statedb"
)

// Observers: the engine tells Config.Observers what happens to each
// request, from the change read to its status written. One hook serves
// every consumer: a tracer (the OpenTelemetry adapter in the otel module),
// a subscription feeding an agent's own event bus (Subscription), an
// audit log.

// Observer is told what happens to a reconciler's requests (see Event).
//
// Observe is called synchronously on the goroutine where the thing
// happened: the reconciler's loop (read, ready, committed, failed, given
// up), a worker (started, finished) or a Sync's goroutine; so possibly
// from several goroutines at once, and it must be safe for concurrent use.
// For one key, calls come one after another in the order of the events
// (each happens before the next).
//
// Observe must return quickly (microseconds, no I/O, no waiting): the
// engine never waits for anything else, and a slow Observe delays the
// key's work and every other key's. An observer that feeds something
// slow hands events over without blocking and drops what does not fit,
// as Subscription does (its drops are counted in the metrics). A panic
// in Observe is recovered: that event is lost to that observer, the
// panic is counted (ObserverMetrics) and the first one is logged.
type Observer interface {
	Observe(e Event)
}

// EventKind says what happened to a request.
type EventKind uint8

// The events of a request's life, in the order they come for one key:
// read, ready, started, finished, committed, then (after a failure)
// failed and given up, or a read again when its retry comes due.
const (
	// EventRead: a change (or a due retry, a refresh, a delete) made a
	// request. Why says which; Revision is the object's revision.
	EventRead EventKind = iota + 1
	// EventReady: the request waits for a worker (it may wait first for
	// an earlier attempt on its key to return).
	EventReady
	// EventStarted: an attempt started, on a worker (Worker), or a whole
	// Sync (Op is OpSync, Key is "", Objects the desired set's size).
	// Attempt, Priority and Target are set.
	EventStarted
	// EventFinished: the operation returned: Result, Duration, Err. For
	// an attempt past OperationTimeout it comes when the call returns,
	// which may be after the loop counted it failed.
	EventFinished
	// EventCommitted: the attempt's result is in the table: Commit says
	// whether its status was written or dropped because the object
	// changed meanwhile (the newer revision is reconciled in its turn);
	// Status is the status the result asked for (Done, or Error).
	EventCommitted
	// EventFailed: the attempt failed (Err); Due is when its retry is
	// due, zero when it is given up on (EventGivenUp follows).
	EventFailed
	// EventGivenUp: the request is not retried until the object changes
	// or is refreshed: a Permanent error, MaxRetries spent, or a
	// misconfiguration (Err).
	EventGivenUp
	// EventBlocked: the request waits for a dependency, or a Delete for
	// its dependents (Config.DependsOn; Err says which, as Explain does).
	EventBlocked
	// EventReleased: what a Blocked request waited for is there: it is
	// ready (a release that finds it still waiting for another
	// dependency tells EventBlocked again instead).
	EventReleased
)

var eventKindNames = [...]string{"", "read", "ready", "started", "finished", "committed", "failed", "given-up", "blocked", "released"}

// String returns the event kind's name ("read", "given-up", ...).
func (k EventKind) String() string {
	if int(k) < len(eventKindNames) && k != 0 {
		return eventKindNames[k]
	}
	return "unknown"
}

// ReadWhy says what made a request (EventRead).
type ReadWhy uint8

// Why a request was made.
const (
	ReadChange  ReadWhy = iota + 1 // the object was written with a Pending status
	ReadDelete                     // the object was deleted
	ReadRefresh                    // refresh marked it Refreshing (or a whole Sync repairs drift)
	ReadRetry                      // its retry came due, or an earlier run left it in Error
)

var readWhyNames = [...]string{"", "change", "delete", "refresh", "retry"}

// String returns the reason's name ("change", "delete", "refresh", "retry").
func (w ReadWhy) String() string {
	if int(w) < len(readWhyNames) && w != 0 {
		return readWhyNames[w]
	}
	return "unknown"
}

// CommitOutcome says what became of an attempt's status write
// (EventCommitted).
type CommitOutcome uint8

// What became of a status write.
const (
	CommitWritten CommitOutcome = iota + 1 // the status is in the table
	CommitDropped                          // not written: the object (or who owns it) changed; a newer request follows
	CommitNothing                          // nothing to write: a delete, a deferral, or an Error already there
)

var commitNames = [...]string{"", "written", "dropped", "nothing"}

// String returns the outcome's name ("written", "dropped", "nothing").
func (c CommitOutcome) String() string {
	if int(c) < len(commitNames) && c != 0 {
		return commitNames[c]
	}
	return "unknown"
}

// Event is one thing that happened to a request. Only the fields its Kind
// names are set. An Observer may keep it: it shares nothing with the
// engine.
type Event struct {
	Kind EventKind
	// Key is the object's primary key as a string (statedb's key bytes);
	// "" for a whole Sync.
	Key string
	// Time is when it happened.
	Time time.Time
	// Revision is the revision of the object read (EventRead), or the
	// one the operation saw (EventStarted).
	Revision statedb.Revision
	// Deleted is set when the request is the object's delete.
	Deleted bool

	// Why is what made the request (EventRead), and its waiting class
	// (EventStarted): a change, a delete, a refresh or a retry.
	Why ReadWhy
	// RequestedAt is when the change being reconciled was written: the
	// UpdatedAt of the Pending status its writer set (EventRead; zero
	// when unknown).
	RequestedAt time.Time

	// Attempt is the attempt's number for this change: 1 for the first,
	// 2 for the first retry, and so on (EventStarted, EventFinished,
	// EventCommitted, EventFailed, EventGivenUp).
	Attempt int
	Op      Op // EventStarted, EventFinished
	// Worker is the number of the worker that runs the attempt (from 1;
	// 0 for a Sync), Priority its Config.Priority and Target its
	// Config.TargetKey (zero without them). EventStarted.
	Worker   int
	Priority int
	Target   string
	// QueuedAt is when the request was queued for this attempt: read, or
	// its retry came due (EventStarted). Time minus QueuedAt is its wait.
	QueuedAt time.Time
	// Objects is a Sync's desired set size (EventStarted, EventFinished
	// with Op OpSync).
	Objects int

	Result   Result        // EventFinished
	Duration time.Duration // EventFinished: how long the call ran
	Err      error         // EventFinished, EventFailed, EventGivenUp (nil on success)

	Commit CommitOutcome // EventCommitted
	Status StatusKind    // EventCommitted: Done or Error
	Due    time.Time     // EventFailed: when the retry is due (zero: given up)
}

// EventFilter is implemented by an Observer that wants only some kinds
// of events (Subscription does, and the OpenTelemetry adapter): the
// engine neither builds nor sends it the others, so that an observer
// costs only what it uses. Wants is asked once per kind, at New.
type EventFilter interface {
	Wants(k EventKind) bool
}

// AttemptFilter is implemented by an Observer that wants the events of
// only some attempts (the OpenTelemetry adapter's head sampler): it says
// so before an attempt starts, and the engine then neither builds nor
// sends it that attempt's EventStarted, EventFinished and
// EventCommitted. When no observer wants an attempt (an observer without
// the interface wants them all), the engine builds none of those events
// and reads no clock for them: an attempt nobody observes costs what it
// costs without observers. The attempt's EventFailed and EventGivenUp
// (few) and the request's other events still come as the observer's
// EventFilter asks.
//
// WantsAttempt is asked once per attempt (once per entry of a batch), on
// the worker, just before the operation is called; it must be quick and
// safe for concurrent use. A panic counts as wanting the attempt. Only
// the first 64 observers of Config.Observers are asked; any later one
// gets every attempt. An attempt that runs past OperationTimeout is
// committed as timed out apart from its worker: that EventCommitted goes
// to every observer that wants the kind, declined or not.
type AttemptFilter interface {
	WantsAttempt(a Attempt) bool
}

// Attempt is what an AttemptFilter is told of an attempt about to start.
type Attempt struct {
	Key      string
	Revision statedb.Revision // the revision the operation is given
	Deleted  bool
	Attempt  int     // 1 for a change's first attempt, 2 for its first retry, ...
	Op       Op      // OpUpdate, OpDelete, OpUpdateBatch or OpDeleteBatch
	Why      ReadWhy // the waiting class: change, delete, refresh or retry
}

// ObserverMetrics is implemented by a ReconcilerMetrics that records what
// observers lost (package metrics' implementations do). It is optional:
// ReconcilerMetrics implementations that predate observers keep working.
type ObserverMetrics interface {
	// ObserverDropped is called when a subscription's buffer was full
	// and it dropped n events.
	ObserverDropped(n int)
	// ObserverPanicked is called when an observer panicked: the event
	// was lost to it.
	ObserverPanicked()
}

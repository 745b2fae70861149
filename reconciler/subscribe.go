package reconciler

import (
	"sync/atomic"
	"time"
)

// DefaultSubscriptionBuffer is the buffer of a Subscription made with a
// buffer of zero: a second's worth of outcomes at a thousand a second.
const DefaultSubscriptionBuffer = 1024

// OutcomeKind says what an Outcome reports.
type OutcomeKind uint8

// The outcomes a Subscription delivers.
const (
	// OutcomeSucceeded: the attempt succeeded and its Done is in the
	// table (a delete: the delete succeeded).
	OutcomeSucceeded OutcomeKind = iota + 1
	// OutcomeFailed: the attempt failed (Err); Due is when it is retried,
	// zero when it is given up on (OutcomeGivenUp follows).
	OutcomeFailed
	// OutcomeRetrying: a failed request's retry came due: it is queued
	// again.
	OutcomeRetrying
	// OutcomeGivenUp: not retried until the object changes or is
	// refreshed (a Permanent error, MaxRetries spent).
	OutcomeGivenUp
)

var outcomeNames = [...]string{"", "succeeded", "failed", "retrying", "given-up"}

// String returns the kind's name ("succeeded", "failed", "retrying",
// "given-up").
func (k OutcomeKind) String() string {
	if int(k) < len(outcomeNames) && k != 0 {
		return outcomeNames[k]
	}
	return "unknown"
}

// Outcome is what became of one attempt, as a Subscription delivers it.
type Outcome struct {
	Kind    OutcomeKind
	Key     string    // the object's primary key (Event.Key)
	Deleted bool      // the request was the object's delete
	Attempt int       // 1 for a change's first attempt, 2 for its first retry, ...
	Err     error     // OutcomeFailed, OutcomeGivenUp
	Due     time.Time // OutcomeFailed: when the retry is due
	Time    time.Time // when it happened
}

// Subscription is an Observer that delivers outcomes (succeeded, failed,
// retrying, given up) on a channel, for an agent that feeds its own event
// bus, audit log or UI. Put it in Config.Observers (of one reconciler or
// several) and read Outcomes.
//
// It never blocks the reconciler: the channel has a fixed buffer, and an
// outcome that finds it full is dropped (the newest is lost, those in the
// buffer stay), counted in Dropped and in the reconciler's metrics
// (ObserverMetrics). The outcomes delivered for one key are in the order
// they happened; a reader that falls behind sees gaps, never a reordering.
// The channel is never closed: stop reading when done.
type Subscription struct {
	ch      chan Outcome
	dropped atomic.Uint64
}

// NewSubscription returns a subscription whose channel buffers buffer
// outcomes (zero: DefaultSubscriptionBuffer).
func NewSubscription(buffer int) *Subscription {
	if buffer <= 0 {
		buffer = DefaultSubscriptionBuffer
	}
	return &Subscription{ch: make(chan Outcome, buffer)}
}

// Outcomes returns the channel outcomes are delivered on.
func (s *Subscription) Outcomes() <-chan Outcome { return s.ch }

// Dropped returns how many outcomes were dropped because the buffer was
// full.
func (s *Subscription) Dropped() uint64 { return s.dropped.Load() }

// Wants implements EventFilter: the kinds an outcome is made of.
func (s *Subscription) Wants(k EventKind) bool {
	switch k {
	case EventRead, EventCommitted, EventFailed, EventGivenUp:
		return true
	}
	return false
}

// Observe implements Observer.
func (s *Subscription) Observe(e Event) { s.offer(e) }

// offer delivers e's outcome, if it has one, without blocking, and
// reports false when it was dropped.
func (s *Subscription) offer(e Event) bool {
	o := Outcome{Key: e.Key, Deleted: e.Deleted, Attempt: e.Attempt, Time: e.Time}
	switch {
	case e.Kind == EventCommitted && e.Status == StatusKindDone && e.Commit != CommitDropped:
		o.Kind = OutcomeSucceeded
	case e.Kind == EventFailed:
		o.Kind, o.Err, o.Due = OutcomeFailed, e.Err, e.Due
	case e.Kind == EventGivenUp:
		o.Kind, o.Err = OutcomeGivenUp, e.Err
	case e.Kind == EventRead && e.Why == ReadRetry:
		o.Kind = OutcomeRetrying
	default:
		return true
	}
	select {
	case s.ch <- o:
		return true
	default:
		s.dropped.Add(1)
		return false
	}
}

var (
	_ Observer    = (*Subscription)(nil)
	_ EventFilter = (*Subscription)(nil)
)

package waitorder

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Target is the fake target every side's operations go to: object id
// belongs to target id % n of its n targets. An Update sleeps Delay, or,
// for an object of the hung target, blocks until its context ends (the
// operation timeout, or the system stopping) and fails with the
// context's error. It counts what it did, per target.
type Target struct {
	// BeforeUpdate, when set, is called as each Update starts: a test's
	// hook to hold an Update while it changes the object. Set it before
	// the system starts.
	BeforeUpdate func(id uint64)

	delay time.Duration
	hung  int // the target whose Updates hang; -1: none

	done      []atomic.Int64 // successful Updates, per target
	failed    atomic.Int64   // Updates that hung and failed
	first     chan struct{}  // closed by the first successful Update
	firstOnce sync.Once
}

// NewTarget returns n targets whose Updates take delay, of which target
// hung hangs (-1: none).
func NewTarget(delay time.Duration, n, hung int) *Target {
	return &Target{delay: delay, hung: hung, done: make([]atomic.Int64, max(n, 1)), first: make(chan struct{})}
}

// Of is the target object id belongs to.
func (t *Target) Of(id uint64) int { return int(id % uint64(len(t.done))) }

// Key is the name of object id's target, the TargetKey of an Order.
func (t *Target) Key(id uint64) string { return "target-" + strconv.Itoa(t.Of(id)) }

// Update applies object id: it sleeps the delay and succeeds, or hangs
// until ctx ends if id belongs to the hung target.
func (t *Target) Update(ctx context.Context, id uint64) error {
	if t.BeforeUpdate != nil {
		t.BeforeUpdate(id)
	}
	k := t.Of(id)
	if k == t.hung {
		<-ctx.Done()
		t.failed.Add(1)
		return ctx.Err()
	}
	if t.delay > 0 {
		tm := time.NewTimer(t.delay)
		select {
		case <-tm.C:
		case <-ctx.Done():
			tm.Stop()
			return ctx.Err()
		}
	}
	t.done[k].Add(1)
	t.firstOnce.Do(func() { close(t.first) })
	return nil
}

// FirstDone is closed once an Update has succeeded.
func (t *Target) FirstDone() <-chan struct{} { return t.first }

// Done is the number of successful Updates of target k.
func (t *Target) Done(k int) int64 { return t.done[k].Load() }

// Updates is the number of successful Updates of every target.
func (t *Target) Updates() int64 {
	var n int64
	for k := range t.done {
		n += t.done[k].Load()
	}
	return n
}

// Failed is the number of Updates that hung and failed.
func (t *Target) Failed() int64 { return t.failed.Load() }

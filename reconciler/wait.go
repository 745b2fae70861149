package reconciler

import (
	"context"
	"fmt"
	"sync"

	"github.com/cilium/statedb"
)

// WaitForReconciliation blocks until the table is initialized and no object
// in it is Pending, Refreshing or Error, or until ctx ends (then it returns
// ctx.Err()). An Unset object asks nothing and is not waited for.
// statusIndex is the table's status index for the reconciler of interest
// (index.NewStatusIndex).
//
// It is meant for tests and for start-up ordering ("do not serve until the
// routes are in"). It looks only at the first object of each non-Done kind
// and sleeps on the index's watch channels: no polling, no scans. Deletes
// leave no object behind to look at; use Reconciler.WaitUntilReconciled to
// wait for those.
func WaitForReconciliation[Obj any](ctx context.Context, db *statedb.DB, table statedb.Table[Obj], statusIndex statedb.Index[Obj, StatusKind]) error {
	notDone := [...]StatusKind{StatusKindPending, StatusKindRefreshing, StatusKindError}
	for {
		txn := db.ReadTxn()
		var watch <-chan struct{}
		if ok, w := table.Initialized(txn); !ok {
			watch = w
		} else {
			for _, kind := range notDone {
				objs, w := table.ListWatch(txn, statusIndex.Query(kind))
				if nonEmpty(objs) {
					watch = w
					break
				}
			}
		}
		if watch == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-watch:
		}
	}
}

// nonEmpty reports whether seq yields at least one object.
func nonEmpty[Obj any](seq func(func(Obj, statedb.Revision) bool)) bool {
	for range seq {
		return true
	}
	return false
}

// progress publishes how far a loop has got, for the waits. The loop
// derives every value from its outstanding work and publishes it after
// each step; waiters read it under the mutex and sleep on changed.
type progress struct {
	mu sync.Mutex
	progressValues
	changed chan struct{} // closed and replaced on every change
}

// progressValues is one publication.
type progressValues struct {
	// reconciled: every change up to it has been attempted. retryLow:
	// the lowest revision of a change not settled (reconciled+1 when
	// none).
	reconciled, retryLow statedb.Revision
	// blocked is set while a misconfiguration keeps objects from being
	// reconciled: the waits return it instead of waiting forever (or
	// returning as if all were well).
	blocked error
	// outstanding counts the requests not settled, and oldest is the one
	// holding retryLow back, for the waits' errors.
	outstanding int
	oldest      oldestRequest
	// ownChanged is the Ownership.Changed channel the loop took before it
	// last looked at the owned set (nil without Config.Ownership). Closed,
	// it says the owned set changed since: what the loop published does
	// not cover keys it may have gained, and a wait waits for it to look.
	ownChanged <-chan struct{}
}

// oldestRequest names the oldest unsettled request; formatted only when a
// wait fails.
type oldestRequest struct {
	key, what, err string
	attempts       int
}

func (o oldestRequest) String() string {
	if o.err != "" {
		return fmt.Sprintf("%s (%s, %d failure(s), last: %s)", o.key, o.what, o.attempts, o.err)
	}
	return fmt.Sprintf("%s (%s)", o.key, o.what)
}

func newProgress() *progress {
	return &progress{changed: make(chan struct{}), progressValues: progressValues{retryLow: 1}}
}

// set publishes new values and wakes the waiters if anything changed.
func (p *progress) set(v progressValues) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if v == p.progressValues {
		return
	}
	p.progressValues = v
	close(p.changed)
	p.changed = make(chan struct{})
}

// waitUntil blocks until done accepts the published values or ctx ends.
// While the owned set changed and the loop has not looked yet, nothing
// published covers the keys gained: it waits for the loop, which wakes on
// the same Changed channel and publishes the next one it takes.
// While a misconfiguration keeps objects from being reconciled it
// returns that error at once: those objects would otherwise count as
// settled (given up on) and the wait would pass as if all were well.
func (p *progress) waitUntil(ctx context.Context, done func(v progressValues) bool) (progressValues, error) {
	for {
		p.mu.Lock()
		v, changed := p.progressValues, p.changed
		p.mu.Unlock()
		if v.blocked != nil {
			return v, v.blocked
		}
		if done(v) && (v.ownChanged == nil || !isClosed(v.ownChanged)) {
			return v, nil
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-changed:
		}
	}
}

// describe says what a wait for rev still waits for.
func (v progressValues) describe(rev statedb.Revision) string {
	switch {
	case v.reconciled < rev && v.outstanding == 0:
		return fmt.Sprintf("changes up to revision %d are not read yet (read up to %d)", rev, v.reconciled)
	case v.oldest.key == "":
		return fmt.Sprintf("%d object(s) outstanding; changes attempted up to revision %d of %d", v.outstanding, v.reconciled, rev)
	}
	return fmt.Sprintf("%d object(s) outstanding, the oldest %s; changes attempted up to revision %d of %d",
		v.outstanding, v.oldest, v.reconciled, rev)
}

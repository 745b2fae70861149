package reconciler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/statedb"
)

// WaitForReconciliation blocks until the table is initialized and no object
// in it is Pending, Refreshing or Error, or until ctx ends. An Unset object
// asks nothing and is not waited for. statusIndex is the table's status
// index for the reconciler of interest (index.NewStatusIndex), which the
// table must have been made with (statedb.NewTable(db, name, primary,
// statusIndex)): without it the wait fails at once, saying so.
//
// It returns at once, with an error wrapping ErrInvalidConfig, when a
// misconfiguration keeps a reconciler of the table from reconciling
// objects (a CloneObject that returns its argument, say): those objects
// would never be Done. When ctx ends first it returns an error wrapping
// ctx.Err() that names the first object not Done and says why it is not,
// as the reconciler explains it (Reconciler.Explain): failing and retried,
// given up on, in flight, not read yet. An object given up on (a Permanent
// error, MaxRetries spent) is never Done until it changes: to wait for
// every change to be attempted or given up on, use
// Reconciler.WaitUntilSettled.
//
// It is meant for tests and for start-up ordering ("do not serve until the
// routes are in"). It looks only at the first object of each non-Done kind
// and sleeps on the index's watch channels: no polling, no scans. Deletes
// leave no object behind to look at; use Reconciler.WaitUntilSettled to
// wait for those.
func WaitForReconciliation[Obj any](ctx context.Context, db *statedb.DB, table statedb.Table[Obj], statusIndex statedb.Index[Obj, StatusKind]) error {
	if !slices.Contains(table.Indexes(), statusIndex.Name) {
		return fmt.Errorf("%w: WaitForReconciliation: table %q has no index %q: make the table with it, "+
			"statedb.NewTable(db, %q, primaryIndex, statusIndex)", ErrInvalidConfig, table.Name(), statusIndex.Name, table.Name())
	}
	for {
		rs := runningOn(db, table.Name())
		published, err := misconfigured(rs)
		if err != nil {
			return err
		}
		txn := db.ReadTxn()
		first, kind, watch := firstNotDone(txn, table, statusIndex)
		if watch == nil {
			return nil
		}
		if waitAny(ctx, append(published, watch)...) {
			return notDoneError(ctx, txn, table, runningOn(db, table.Name()), first, kind)
		}
	}
}

// firstNotDone returns the first object not Done and its kind, with the
// watch channel that closes when that changes; before the table is
// initialized, the initialization's channel and no object. A nil watch
// means everything is Done.
func firstNotDone[Obj any](txn statedb.ReadTxn, table statedb.Table[Obj], statusIndex statedb.Index[Obj, StatusKind]) (obj Obj, kind StatusKind, watch <-chan struct{}) {
	if ok, w := table.Initialized(txn); !ok {
		return obj, kind, w
	}
	for _, kind := range [...]StatusKind{StatusKindPending, StatusKindRefreshing, StatusKindError} {
		objs, w := table.ListWatch(txn, statusIndex.Query(kind))
		for o := range objs {
			return o, kind, w
		}
	}
	return obj, kind, nil
}

// notDoneError says what WaitForReconciliation waited for when ctx ended.
func notDoneError[Obj any](ctx context.Context, txn statedb.ReadTxn, table statedb.Table[Obj], rs []runningReconciler, obj Obj, kind StatusKind) error {
	if ok, _ := table.Initialized(txn); !ok {
		return fmt.Errorf("waiting for table %q: not initialized (pending initializers: %s): %w",
			table.Name(), strings.Join(table.PendingInitializers(txn), ", "), ctx.Err())
	}
	k, _ := table.PrimaryIndexer().ObjectToKey(obj)
	what := fmt.Sprintf("%s is %s", printableKey(string(k)), kind)
	found := false
	for _, r := range rs {
		if st, ok := r.statusIn(obj); ok && st.Kind == kind {
			if st.Error != "" {
				what += ": " + trimMessage(st.Error)
			}
			if why := explainBriefly(ctx, r, k); why != "" {
				what += "; " + r.displayName() + " says " + why
			}
			found = true
			break
		}
	}
	if !found {
		what += fmt.Sprintf("; no reconciler of table %q whose status that is runs in this process", table.Name())
	}
	return fmt.Errorf("waiting for table %q: %s (the first object not Done): %w", table.Name(), what, ctx.Err())
}

// trimMessage cuts an error message for a wait's error: the status keeps
// it whole.
func trimMessage(s string) string {
	const max = 256
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}

// wrapName puts a reconciler's name before err.
func wrapName(name string, err error) error { return fmt.Errorf("%s: %w", name, err) }

// WaitUntilReconciled implements Reconciler.
func (r *reconciler[Obj]) WaitUntilReconciled(ctx context.Context, rev statedb.Revision) (statedb.Revision, statedb.Revision, error) {
	v, err := r.progress.waitUntil(ctx, func(v progressValues) bool { return v.reconciled >= rev })
	if err != nil {
		err = r.waitError(ctx, "not reconciled", v, rev, err)
	}
	return v.reconciled, v.retryLow, err
}

// WaitUntilSettled implements Reconciler.
func (r *reconciler[Obj]) WaitUntilSettled(ctx context.Context, rev statedb.Revision) error {
	v, err := r.progress.waitUntil(ctx, func(v progressValues) bool {
		return v.reconciled >= rev && v.retryLow > rev
	})
	if err != nil {
		return r.waitError(ctx, "not settled", v, rev, err)
	}
	return nil
}

// WaitUntilPruned implements Reconciler.
func (r *reconciler[Obj]) WaitUntilPruned(ctx context.Context, rev statedb.Revision) error {
	v, err := r.progress.waitUntil(ctx, func(v progressValues) bool { return v.prunedTo >= rev })
	if err == nil {
		return nil
	}
	last := ""
	if s := r.Status(); s.LastFull.Error != "" {
		last = "; the last full reconciliation failed: " + s.LastFull.Error
	}
	return fmt.Errorf("%s not pruned: the latest successful prune saw changes up to revision %d (waiting for %d)%s: %w",
		r.id.DisplayName(), v.prunedTo, rev, last, err)
}

// waitError is the error of a wait for rev that ended with err (a
// misconfiguration, or ctx's end) when the progress was v: what it waited
// for, and, when it gave up, where its oldest key stands, as Explain says.
func (r *reconciler[Obj]) waitError(ctx context.Context, what string, v progressValues, rev statedb.Revision, err error) error {
	why := ""
	if (v.blocked == nil || !errors.Is(err, v.blocked)) && v.oldest.raw != "" {
		if e := explainBriefly(ctx, r, []byte(v.oldest.raw)); e != "" {
			why = "; " + v.oldest.key + " is " + e
		}
	}
	return fmt.Errorf("%s %s: %s%s: %w", r.id.DisplayName(), what, v.describe(rev), why, err)
}

// waitSettled waits until every change made before the call has settled.
func (r *reconciler[Obj]) waitSettled(ctx context.Context) error {
	return r.WaitUntilSettled(ctx, r.cfg.Table.Revision(r.db.ReadTxn()))
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
	// prunedTo is the revision of the snapshot of the latest Prune (whole
	// set: Sync) that succeeded in this run: it saw every change up to it.
	prunedTo statedb.Revision
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
	raw            string // the key's bytes, for Explain
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
		return fmt.Sprintf("%d object(s) outstanding; changes attempted up to revision %d (waiting for %d)", v.outstanding, v.reconciled, rev)
	}
	return fmt.Sprintf("%d object(s) outstanding, the oldest %s; changes attempted up to revision %d (waiting for %d)",
		v.outstanding, v.oldest, v.reconciled, rev)
}

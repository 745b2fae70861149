package reconciler

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"

	"github.com/cilium/statedb"
)

// SyncOperations serve a whole-set target: one that takes the entire desired
// state at once, rendered from one snapshot and applied atomically (an
// nftables ruleset loaded with nft -f, iptables-restore, a config file that
// is reloaded, an xDS snapshot). Give them as Config.SyncOperations instead
// of Operations.
//
// Sync is never called while another Sync runs, and the first Sync of a run
// waits until the table is initialized: a partial desired set would remove
// real state.
type SyncOperations[Obj any] interface {
	// Sync makes the target equal to the whole desired set: every object in
	// desired, read from txn, and nothing else. changes are the objects
	// changed or deleted since the last successful Sync, in revision order,
	// for targets that can apply a difference; in the first Sync of a run
	// they hold every object, since nothing is known of what an earlier run
	// applied. Neither the objects nor txn may be kept or modified after
	// Sync returns.
	//
	// A nil error marks every object that was Pending, Refreshing or in
	// Error in txn Done. An error fails all of them, and the Sync is retried
	// with backoff (RetryAfter and Permanent apply as for Update). To fail
	// only some objects (an invalid object the renderer skipped), return
	// FailObjects: those objects alone are Error and retried, the others
	// are Done.
	Sync(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[Obj, statedb.Revision], changes iter.Seq[Change[Obj]]) error
}

// Change is one object changed or deleted since the last successful Sync.
type Change[Obj any] struct {
	Object   Obj
	Revision statedb.Revision
	Deleted  bool
}

// ObjectFailure says why one object could not be applied. Err may be
// Permanent (not retried until the object changes) or RetryAfter.
type ObjectFailure[Obj any] struct {
	Object Obj
	Err    error
}

// FailObjects returns the error a Sync returns when it applied the whole
// set except the given objects: those are Error with their own message and
// retried, the rest are Done. It returns nil when failures is empty, so a
// renderer can return FailObjects(skipped...) unconditionally. Objects are
// matched by primary key; a nil Err counts as a failure with no message.
func FailObjects[Obj any](failures ...ObjectFailure[Obj]) error {
	if len(failures) == 0 {
		return nil
	}
	return &objectFailures[Obj]{failures: failures}
}

// objectFailures is FailObjects's error.
type objectFailures[Obj any] struct {
	failures []ObjectFailure[Obj]
}

func (e *objectFailures[Obj]) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d object(s) failed", len(e.failures))
	for i, f := range e.failures {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(e.failures)-i)
			break
		}
		fmt.Fprintf(&b, "; %v", f.Err)
	}
	return b.String()
}

// perObject splits a Sync's error into the failures of single objects
// (FailObjects), by primary key, and the error of the whole Sync.
func (r *reconciler[Obj]) perObject(err error) (objects map[string]ObjectFailure[Obj], whole error) {
	var of *objectFailures[Obj]
	if err == nil || !errors.As(err, &of) {
		return nil, err
	}
	objects = make(map[string]ObjectFailure[Obj], len(of.failures))
	for _, f := range of.failures {
		if f.Err == nil {
			f.Err = errors.New("failed")
		}
		objects[r.keyOf(f.Object)] = ObjectFailure[Obj]{Object: f.Object, Err: safeErr(OpSync, f.Err)}
	}
	return objects, nil
}

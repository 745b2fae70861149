package reconciler_test

import (
	"context"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// pruneRaceOps is a target whose Prune hangs past its timeout and then
// removes what its (old) snapshot did not hold, while an Update of a new
// object applied before that removal returns only after the Prune did.
type pruneRaceOps struct {
	mu       sync.Mutex
	state    map[string]bool
	pruning  chan struct{} // signalled when the Prune starts
	applied  chan struct{} // closed when x's Update has applied
	release  chan struct{} // lets the Prune remove and return
	returned chan struct{} // closed when the Prune returned
}

func (o *pruneRaceOps) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *testObject) error {
	o.mu.Lock()
	o.state[obj.ID] = true
	first := obj.ID == "x" && obj.Status.Kind == reconciler.StatusKindPending
	o.mu.Unlock()
	if first {
		close(o.applied)
		<-o.returned // applied before the Prune removed it; returns after
	}
	return nil
}

func (o *pruneRaceOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *testObject) error {
	return nil
}

func (o *pruneRaceOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*testObject, statedb.Revision]) error {
	signal(o.pruning)
	<-o.release // ignores ctx: abandoned at its timeout
	o.mu.Lock()
	delete(o.state, "x") // its snapshot predates x
	o.mu.Unlock()
	close(o.returned)
	return nil
}

// An abandoned Prune that returns late may remove what an Update applied
// meanwhile; that Update's object must be applied again even when its
// result comes with, or after, the Prune's return (not only when it was
// already Done then).
func TestRegressAbandonedPruneRepairsConcurrentUpdate(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	ops := &pruneRaceOps{state: map[string]bool{}, pruning: make(chan struct{}, 1), applied: make(chan struct{}),
		release: make(chan struct{}), returned: make(chan struct{})}
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{Concurrency: 4, OperationTimeout: 30 * time.Millisecond}))
	f.markInit()
	<-ops.pruning
	f.waitFor(ctx, t, "the prune abandoned", func() bool { return strings.Contains(r.Status().LastFull.Error, "timed out") })
	f.insert(t, &testObject{ID: "x", Status: reconciler.StatusPending()})
	<-ops.applied
	close(ops.release)
	f.waitFor(ctx, t, "x in the target, Done", func() bool {
		ops.mu.Lock()
		defer ops.mu.Unlock()
		return ops.state["x"] && f.get("x").Status.Kind == reconciler.StatusKindDone
	})
}

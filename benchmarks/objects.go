package main

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	sdbindex "github.com/cilium/statedb/index"
	sdbrec "github.com/cilium/statedb/reconciler"

	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// The two sides reconcile the same kind of object: a numeric key, a value
// that changes, and the side's own status type. The types differ only in
// the status, as the two libraries' Status types differ.

// convergeObject is the desired object of the converge side.
type convergeObject struct {
	ID     uint64
	Value  uint64
	Status reconciler.Status
}

func (o *convergeObject) clone() *convergeObject { c := *o; return &c }

func (o *convergeObject) id() uint64 { return o.ID }

func (o *convergeObject) TableHeader() []string { return []string{"ID", "Value", "Status"} }

func (o *convergeObject) TableRow() []string {
	return []string{strconv.FormatUint(o.ID, 10), strconv.FormatUint(o.Value, 10), o.Status.Kind.String()}
}

// statedbObject is the desired object of the statedb side.
type statedbObject struct {
	ID     uint64
	Value  uint64
	Status sdbrec.Status
}

func (o *statedbObject) clone() *statedbObject { c := *o; return &c }

func (o *statedbObject) id() uint64 { return o.ID }

func (o *statedbObject) TableHeader() []string { return []string{"ID", "Value", "Status"} }

func (o *statedbObject) TableRow() []string {
	return []string{strconv.FormatUint(o.ID, 10), strconv.FormatUint(o.Value, 10), o.Status.Kind.String()}
}

var (
	convergeIDIndex = statedb.Index[*convergeObject, uint64]{
		Name:       "id",
		FromObject: func(o *convergeObject) sdbindex.KeySet { return sdbindex.NewKeySet(sdbindex.Uint64(o.ID)) },
		FromKey:    sdbindex.Uint64,
		Unique:     true,
	}
	convergeStatusIndex = index.NewStatusIndex("status", func(o *convergeObject) reconciler.Status { return o.Status })

	statedbIDIndex = statedb.Index[*statedbObject, uint64]{
		Name:       "id",
		FromObject: func(o *statedbObject) sdbindex.KeySet { return sdbindex.NewKeySet(sdbindex.Uint64(o.ID)) },
		FromKey:    sdbindex.Uint64,
		Unique:     true,
	}
	// statedbStatusIndex is the statedb side's equivalent of
	// index.NewStatusIndex: statedb (v0.9.4 too) ships no status index.
	statedbStatusIndex = statedb.Index[*statedbObject, sdbrec.StatusKind]{
		Name:       "status",
		FromObject: func(o *statedbObject) sdbindex.KeySet { return sdbindex.NewKeySet(o.Status.Kind.Key()) },
		FromKey:    sdbrec.StatusKind.Key,
		Unique:     false,
	}
)

// errTargetDown is what a failing target returns. It is allocated once so
// that neither side pays for building errors the other does not.
var errTargetDown = errors.New("target down")

// target is the reconciliation target both sides drive. It does nothing
// but count, optionally sleeps (an I/O-bound target) and optionally fails
// until healed.
type target struct {
	delay   time.Duration // each Update sleeps this long
	failing atomic.Bool   // Update fails with errTargetDown while set

	updates   atomic.Int64 // Update calls
	refreshes atomic.Int64 // successful Updates of objects marked Refreshing
	prunes    atomic.Int64 // Prune calls
	pruned    atomic.Int64 // objects the Prunes were given

	// refreshGoal, when positive, is the number of refreshes after which
	// refreshed is closed.
	refreshGoal int64
	refreshed   chan struct{}
	pruneDone   chan struct{} // closed by the first Prune
	pruneOnce   sync.Once
}

func newTarget() *target {
	return &target{refreshed: make(chan struct{}), pruneDone: make(chan struct{})}
}

func (t *target) update(ctx context.Context, refreshing bool) error {
	t.updates.Add(1)
	if t.failing.Load() {
		return errTargetDown
	}
	if t.delay > 0 {
		sleep(ctx, t.delay)
	}
	if refreshing && t.refreshes.Add(1) == t.refreshGoal {
		close(t.refreshed)
	}
	return nil
}

func (t *target) prune(n int) {
	t.pruned.Add(int64(n))
	t.prunes.Add(1)
	t.pruneOnce.Do(func() { close(t.pruneDone) })
}

// sleep waits for d or until ctx ends. time.Sleep would do as well; the
// timer lets a stopping hive cut the wait short.
func sleep(ctx context.Context, d time.Duration) {
	if ctx.Done() == nil {
		time.Sleep(d)
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}

// count walks a Prune's desired set as a real Prune would, and returns its
// size.
func count[Obj any](objs iter.Seq2[Obj, statedb.Revision]) int {
	n := 0
	for range objs {
		n++
	}
	return n
}

// convergeOps adapts the target to converge's Operations.
type convergeOps struct{ t *target }

func (o convergeOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *convergeObject) error {
	return o.t.update(ctx, obj.Status.Kind == reconciler.StatusKindRefreshing)
}

func (o convergeOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *convergeObject) error {
	return nil
}

func (o convergeOps) Prune(_ context.Context, _ statedb.ReadTxn, objs iter.Seq2[*convergeObject, statedb.Revision]) error {
	o.t.prune(count(objs))
	return nil
}

// statedbOps adapts the target to statedb's Operations.
type statedbOps struct{ t *target }

func (o statedbOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *statedbObject) error {
	return o.t.update(ctx, obj.Status.Kind == sdbrec.StatusKindRefreshing)
}

func (o statedbOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *statedbObject) error {
	return nil
}

func (o statedbOps) Prune(_ context.Context, _ statedb.ReadTxn, objs iter.Seq2[*statedbObject, statedb.Revision]) error {
	o.t.prune(count(objs))
	return nil
}

// statedbNopMetrics is a no-op implementation of statedb's Metrics, the
// counterpart of reconciler.NopMetrics: neither side pays for metrics.
type statedbNopMetrics struct{}

func (statedbNopMetrics) ReconciliationDuration(cell.FullModuleID, string, string, time.Duration) {}
func (statedbNopMetrics) ReconciliationErrors(cell.FullModuleID, string, int, int)                {}
func (statedbNopMetrics) PruneError(cell.FullModuleID, string, error)                             {}
func (statedbNopMetrics) PruneDuration(cell.FullModuleID, string, time.Duration)                  {}

var _ sdbrec.Metrics = statedbNopMetrics{}

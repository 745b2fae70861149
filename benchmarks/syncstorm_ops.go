package main

import (
	"context"
	"iter"

	"github.com/cilium/statedb"
	sdbrec "github.com/cilium/statedb/reconciler"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/benchmarks/internal/bench"
	"github.com/converge-go/converge/reconciler"
)

func (o *statedbObject) fields() (id, value uint64) { return o.ID, o.Value }

// convergeSyncOps are converge's SyncOperations over a renderTarget: every
// Sync renders the whole desired set.
type convergeSyncOps struct{ t *renderTarget }

func (o convergeSyncOps) Sync(_ context.Context, _ statedb.ReadTxn, desired iter.Seq2[*convergeObject, statedb.Revision], _ iter.Seq[reconciler.Change[*convergeObject]]) error {
	render(o.t, desired, (*convergeObject).fields)
	return nil
}

// useSync makes cfg a whole-set reconciler over t, with the default
// SyncDebounce: the trailing edge, 100 ms quiet, 1 s at most.
func (o convergeSyncOps) useSync(cfg *reconciler.Config[*convergeObject]) {
	cfg.Operations = nil
	cfg.SyncOperations = o
	cfg.RoundRateLimiter = nil // SyncDebounce paces Syncs
	cfg.Metrics = &o.t.rounds
}

// statedbRenderOps emulate a whole-set target with statedb's reconciler:
// every operation, batch or single, renders the whole table in the round's
// snapshot, whatever objects it was given.
type statedbRenderOps struct {
	t     *renderTarget
	table statedb.Table[*statedbObject]
}

func (o statedbRenderOps) renderTable(txn statedb.ReadTxn) {
	render(o.t, o.table.All(txn), (*statedbObject).fields)
}

func (o statedbRenderOps) UpdateBatch(_ context.Context, txn statedb.ReadTxn, _ []sdbrec.BatchEntry[*statedbObject]) {
	o.renderTable(txn)
}

func (o statedbRenderOps) DeleteBatch(_ context.Context, txn statedb.ReadTxn, _ []sdbrec.BatchEntry[*statedbObject]) {
	o.renderTable(txn)
}

func (o statedbRenderOps) Update(_ context.Context, txn statedb.ReadTxn, _ statedb.Revision, _ *statedbObject) error {
	o.renderTable(txn)
	return nil
}

func (o statedbRenderOps) Delete(_ context.Context, txn statedb.ReadTxn, _ statedb.Revision, _ *statedbObject) error {
	o.renderTable(txn)
	return nil
}

func (o statedbRenderOps) Prune(_ context.Context, _ statedb.ReadTxn, objs iter.Seq2[*statedbObject, statedb.Revision]) error {
	render(o.t, objs, (*statedbObject).fields)
	return nil
}

// statedbRoundLimit is the statedb side's round limiter in sync-storm
// (see syncStormRoundRate).
func statedbRoundLimit() sdbrec.Option {
	return sdbrec.WithRoundLimits(bench.RoundSize, rate.NewLimiter(syncStormRoundRate, 1))
}

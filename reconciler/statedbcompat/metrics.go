package statedbcompat

import (
	"strings"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	sdbreconciler "github.com/cilium/statedb/reconciler"

	"github.com/converge-go/converge/reconciler"
)

// Metrics returns a converge Metrics that reports to m, an implementation
// of statedb's reconciler.Metrics (the four methods every Cilium agent
// implements once for all its reconcilers), in statedb's terms:
//
//   - ReconciliationDuration, once per operation call: "update" for Update,
//     UpdateBatch and a whole-set Sync, "delete" for Delete and DeleteBatch.
//   - ReconciliationErrors, once per round: the operations (batch entries
//     counted one by one) that failed since the last round, and the objects
//     whose last attempt failed now (converge's Gauges.Failing). A deferral
//     (RetryAfter with a nil error) is not a failure, as in statedb.
//   - PruneDuration and PruneError, once per full reconciliation.
//
// Each converge reconciler is reported under its hive module and
// Config.Name, as statedb's would be. converge's own series (results by
// kind, realization latency, gauges) have no statedb counterpart and are
// dropped: give Config.Metrics converge's metrics package as well if you
// want them (metrics.Cell, or a Metrics that forwards to both).
func Metrics(m sdbreconciler.Metrics) reconciler.Metrics {
	return metricsAdapter{m: m}
}

type metricsAdapter struct{ m sdbreconciler.Metrics }

// Reconciler implements reconciler.Metrics.
func (a metricsAdapter) Reconciler(id reconciler.ReconcilerID) reconciler.ReconcilerMetrics {
	return &reconcilerAdapter{m: a.m, module: moduleID(id.ModuleID), name: id.Name}
}

// moduleID turns the module ID converge reports (cell.FullModuleID's
// String, its parts joined by dots) back into a FullModuleID. Module IDs
// are lower-case words without dots, so the split is exact.
func moduleID(s string) cell.FullModuleID {
	if s == "" {
		return nil
	}
	return cell.FullModuleID(strings.Split(s, "."))
}

// reconcilerAdapter is one reconciler's metrics. Its methods are called
// from the loop and the workers at once: the error count is atomic.
type reconcilerAdapter struct {
	m         sdbreconciler.Metrics
	module    cell.FullModuleID
	name      string
	newErrors atomic.Int64 // failures since the last Gauges
}

// failed reports whether result counts as an error in statedb's metrics.
func failed(result reconciler.Result) bool {
	return result != reconciler.ResultOK && result != reconciler.ResultDeferred
}

// Operation implements reconciler.ReconcilerMetrics.
func (r *reconcilerAdapter) Operation(op reconciler.Op, result reconciler.Result, objects int, d time.Duration) {
	var name string
	switch op {
	case reconciler.OpUpdate, reconciler.OpUpdateBatch, reconciler.OpSync:
		name = sdbreconciler.OpUpdate
	case reconciler.OpDelete, reconciler.OpDeleteBatch:
		name = sdbreconciler.OpDelete
	default:
		return // Prune: FullReconciliation reports it
	}
	r.m.ReconciliationDuration(r.module, r.name, name, d)
	if objects > 0 && failed(result) {
		r.newErrors.Add(1) // a batch's entries come through BatchEntries
	}
}

// BatchEntries implements reconciler.ReconcilerMetrics.
func (r *reconcilerAdapter) BatchEntries(_ reconciler.Op, result reconciler.Result, n int) {
	if failed(result) {
		r.newErrors.Add(int64(n))
	}
}

// Gauges implements reconciler.ReconcilerMetrics: statedb reports errors
// once per round, with the count of objects failing now.
func (r *reconcilerAdapter) Gauges(g reconciler.Gauges) {
	r.m.ReconciliationErrors(r.module, r.name, int(r.newErrors.Swap(0)), g.Failing)
}

// FullReconciliation implements reconciler.ReconcilerMetrics.
func (r *reconcilerAdapter) FullReconciliation(d time.Duration, err error) {
	r.m.PruneDuration(r.module, r.name, d)
	r.m.PruneError(r.module, r.name, err)
}

// Round implements reconciler.ReconcilerMetrics; statedb has no such series.
func (r *reconcilerAdapter) Round(int, time.Duration) {}

// RetryScheduled implements reconciler.ReconcilerMetrics; statedb has no
// such series.
func (r *reconcilerAdapter) RetryScheduled() {}

// ReadyWaits implements reconciler.ReconcilerMetrics; statedb has no such
// series.
func (r *reconcilerAdapter) ReadyWaits([]reconciler.ReadyWait) {}

// UnreconciledWrite implements reconciler.ReconcilerMetrics; statedb has
// no such series.
func (r *reconcilerAdapter) UnreconciledWrite() {}

// Realized implements reconciler.ReconcilerMetrics; statedb has no such
// series.
func (r *reconcilerAdapter) Realized([]time.Duration) {}

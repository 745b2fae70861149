package reconciler

import "time"

// ReconcilerID identifies one reconciler in metrics: the hive module it
// runs in and its Config.Name.
type ReconcilerID struct {
	ModuleID string
	Name     string
}

// Op names an operation in metrics.
type Op string

// The operations a reconciler reports.
const (
	OpUpdate      Op = "update"
	OpDelete      Op = "delete"
	OpPrune       Op = "prune"
	OpUpdateBatch Op = "update-batch"
	OpDeleteBatch Op = "delete-batch"
	OpSync        Op = "sync" // a whole-set Sync (SyncOperations)
)

// Ops lists every Op, so implementations can pre-create their series. Do
// not modify it.
var Ops = []Op{OpUpdate, OpDelete, OpPrune, OpUpdateBatch, OpDeleteBatch, OpSync}

// Result is the outcome of one operation (or one object of a batch) in
// metrics.
type Result string

// The results a reconciler reports.
const (
	ResultOK        Result = "ok"        // succeeded
	ResultError     Result = "error"     // failed, will be retried
	ResultPanic     Result = "panic"     // panicked, recovered, will be retried
	ResultTimeout   Result = "timeout"   // ran past Config.OperationTimeout, will be retried
	ResultPermanent Result = "permanent" // failed with Permanent, not retried until the object changes
	ResultDeferred  Result = "deferred"  // RetryAfter(d, nil): not ready, not a failure
	ResultExhausted Result = "exhausted" // failed and Config.MaxRetries is spent
)

// Results lists every Result, so implementations can pre-create their
// series. Do not modify it.
var Results = []Result{ResultOK, ResultError, ResultPanic, ResultTimeout, ResultPermanent, ResultDeferred, ResultExhausted}

// Gauges is the state of a reconciler after a round.
type Gauges struct {
	Failing  int // objects whose last attempt failed (status Error), deletes included
	Waiting  int // objects picked up whose result is not committed yet
	InFlight int // operations running now (a batch counts once): at most Concurrency, not those past OperationTimeout
	Retries  int // objects in the retry queue
	Blocked  int // objects waiting for their dependencies (Config.DependsOn, Config.Requires), or a Delete for its dependents

	// OldestWaiting is how long the longest-waiting picked-up object has
	// waited for its result to be committed (zero when none waits).
	OldestWaiting time.Duration
}

// ReadyWait is how long the longest-waiting ready request of a priority
// has waited (reconcilers with Config.Priority, FairnessKey or TargetKey).
type ReadyWait struct {
	Priority int           `json:"priority"`
	Oldest   time.Duration `json:"oldest"`
}

// Metrics is how a reconciler reports what it does. Implementations live in
// package metrics (Prometheus and expvar); the zero Config uses the module's
// default, else nothing is recorded.
//
// Reconciler is called once per reconciler, at construction, so that an
// implementation can resolve its labels once instead of on every call; every
// call on the returned ReconcilerMetrics is about that reconciler.
type Metrics interface {
	Reconciler(id ReconcilerID) ReconcilerMetrics
}

// ReconcilerMetrics records the events of one reconciler. Calls come from
// the reconciler's loop and its workers, possibly at the same time: an
// implementation must be safe for concurrent use and cheap (it is on the hot
// path: microseconds, no I/O).
type ReconcilerMetrics interface {
	// Operation is called once per ended operation call. objects is 1 for
	// single-object operations and the number of desired objects for
	// prune. For a batch, result is ResultOK when every entry succeeded and
	// the worst entry's result otherwise, and objects is 0: its entries are
	// reported by BatchEntries, each with its own result. A whole-set
	// Sync is reported like a batch: result is that of the Sync as a whole
	// (ResultOK when it applied the set, even if it failed some objects),
	// objects is 0, and BatchEntries counts the objects it covered that
	// asked for work.
	Operation(op Op, result Result, objects int, d time.Duration)

	// BatchEntries is called after a batch's Operation, once per result
	// its entries ended with: n entries of the batch ended with result.
	BatchEntries(op Op, result Result, n int)

	// Round is called after each incremental round that committed results:
	// how many objects it committed and how long it took from picking the
	// work up to the commit.
	Round(objects int, d time.Duration)

	// FullReconciliation is called after each full reconciliation with its
	// duration (waiting for in-flight work, then Prune) and Prune's error.
	FullReconciliation(d time.Duration, err error)

	// RetryScheduled is called each time an object is put in the retry queue.
	RetryScheduled()

	// UnreconciledWrite is called when a writer changed an object but
	// kept this reconciler's Done or Error status instead of writing
	// StatusPending(): the change is not reconciled. It is called only
	// where that is unambiguous (see Explain's Reason for the key).
	UnreconciledWrite()

	// Realized is called after a commit that marked objects Done, with
	// each one's realization latency: the time from the change being
	// written (the UpdatedAt of the Pending status its writer set, Get's
	// for a StatusSet) to the commit of the Done status. A change that
	// failed first counts from that same write to the commit of the retry
	// that succeeded. Failures, refreshes, deletes, and statuses with a
	// zero UpdatedAt (or one after the commit) are not reported: see
	// RealizationInfo. The slice is reused once Realized returns: do not
	// keep it.
	Realized(latencies []time.Duration)

	// Gauges is called after every round with the current state.
	Gauges(g Gauges)

	// ReadyWaits is called after Gauges by reconcilers with
	// Config.Priority, FairnessKey or TargetKey: the oldest ready wait of
	// each priority with ready requests, highest first (empty when none
	// waits). The slice is not kept by the reconciler.
	ReadyWaits(waits []ReadyWait)
}

// NopMetrics records nothing. It is the fallback when neither Config.Metrics
// nor a module default is given.
type NopMetrics struct{}

// Reconciler implements Metrics.
func (NopMetrics) Reconciler(ReconcilerID) ReconcilerMetrics { return NopMetrics{} }

// Operation implements ReconcilerMetrics.
func (NopMetrics) Operation(Op, Result, int, time.Duration) {}

// BatchEntries implements ReconcilerMetrics.
func (NopMetrics) BatchEntries(Op, Result, int) {}

// Round implements ReconcilerMetrics.
func (NopMetrics) Round(int, time.Duration) {}

// FullReconciliation implements ReconcilerMetrics.
func (NopMetrics) FullReconciliation(time.Duration, error) {}

// RetryScheduled implements ReconcilerMetrics.
func (NopMetrics) RetryScheduled() {}

// UnreconciledWrite implements ReconcilerMetrics.
func (NopMetrics) UnreconciledWrite() {}

// Realized implements ReconcilerMetrics.
func (NopMetrics) Realized([]time.Duration) {}

// Gauges implements ReconcilerMetrics.
func (NopMetrics) Gauges(Gauges) {}

// ReadyWaits implements ReconcilerMetrics.
func (NopMetrics) ReadyWaits([]ReadyWait) {}

var (
	_ Metrics           = NopMetrics{}
	_ ReconcilerMetrics = NopMetrics{}
)

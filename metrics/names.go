package metrics

// This file is the one place that names the metrics. The Prometheus and
// expvar implementations build their series from these definitions, the
// tests check METRICS.md, alerts.yaml and dashboard.json against them, and
// Definitions hands them to users.

// Kind is the Prometheus type of a metric.
type Kind string

// The kinds of metric this package exports.
const (
	KindCounter   Kind = "counter"
	KindGauge     Kind = "gauge"
	KindHistogram Kind = "histogram"
)

// Label names. Every series carries module_id and name; op and result are
// added where they apply.
const (
	LabelModuleID = "module_id" // ReconcilerID.ModuleID: the hive module the reconciler runs in
	LabelName     = "name"      // ReconcilerID.Name: the reconciler's Config.Name
	LabelOp       = "op"        // a reconciler.Op
	LabelResult   = "result"    // a reconciler.Result
	LabelPriority = "priority"  // a request's Config.Priority
)

// Prefix starts the name of every Prometheus metric of this package.
const Prefix = "converge_reconciler_"

// Definition describes one metric: its Prometheus name, type and labels,
// and what it means. ExpVar uses the name without Prefix as its key.
type Definition struct {
	Name   string   // the Prometheus name, starting with Prefix
	Kind   Kind     // counter, gauge or histogram
	Labels []string // label names, in the order of the series' label values
	Help   string   // what it counts or measures; the HELP text and METRICS.md's meaning
}

// Short returns the name without Prefix, the key ExpVar uses.
func (d Definition) Short() string { return d.Name[len(Prefix):] }

var (
	idLabels       = []string{LabelModuleID, LabelName}
	opLabels       = []string{LabelModuleID, LabelName, LabelOp}
	opResultLabels = []string{LabelModuleID, LabelName, LabelOp, LabelResult}
)

// The metrics, in the order METRICS.md lists them.
var (
	defOperations = Definition{
		Name:   Prefix + "operations_total",
		Kind:   KindCounter,
		Labels: opResultLabels,
		Help:   "Operation calls that ended, by operation and result. A batch call counts once, with the worst result of its entries.",
	}
	defOperationObjects = Definition{
		Name:   Prefix + "operation_objects_total",
		Kind:   KindCounter,
		Labels: opResultLabels,
		Help:   "Objects handled by the operation calls, by their own result: 1 per update or delete, each batch entry with its own result, the number of desired objects per prune.",
	}
	defOperationDuration = Definition{
		Name:   Prefix + "operation_duration_seconds",
		Kind:   KindHistogram,
		Labels: opLabels,
		Help:   "How long operation calls took, whatever their result.",
	}
	defRoundObjects = Definition{
		Name:   Prefix + "round_objects_total",
		Kind:   KindCounter,
		Labels: idLabels,
		Help:   "Operation results committed to the table by incremental rounds (successes and failures).",
	}
	defRoundDuration = Definition{
		Name:   Prefix + "round_duration_seconds",
		Kind:   KindHistogram,
		Labels: idLabels,
		Help:   "How long incremental rounds took, from picking up their oldest object to committing the results. Its _count is the number of rounds.",
	}
	defRealizationDuration = Definition{
		Name:   Prefix + "realization_duration_seconds",
		Kind:   KindHistogram,
		Labels: idLabels,
		Help:   "Time from a change being written (the UpdatedAt of the Pending status its writer set) to the commit of its Done status, per object, retries included. Failures, refreshes, deletes and statuses without UpdatedAt are not observed.",
	}
	defFullDuration = Definition{
		Name:   Prefix + "full_reconciliation_duration_seconds",
		Kind:   KindHistogram,
		Labels: idLabels,
		Help:   "How long full reconciliations took: waiting for in-flight operations, then Prune. Its _count is the number of full reconciliations.",
	}
	defFullFailing = Definition{
		Name:   Prefix + "full_reconciliation_failing",
		Kind:   KindGauge,
		Labels: idLabels,
		Help:   "1 when the last full reconciliation's Prune failed, else 0.",
	}
	defRetriesScheduled = Definition{
		Name:   Prefix + "retries_scheduled_total",
		Kind:   KindCounter,
		Labels: idLabels,
		Help:   "Times an object was put in the retry queue.",
	}
	defUnreconciledWrites = Definition{
		Name:   Prefix + "unreconciled_writes_total",
		Kind:   KindCounter,
		Labels: idLabels,
		Help:   "Writes that changed an object but kept this reconciler's Done or Error status instead of asking for reconciliation (StatusPending()): the change is not reconciled. Any above zero is a bug in a writer; Explain names the key.",
	}
	defObserverDropped = Definition{
		Name:   Prefix + "observer_events_dropped_total",
		Kind:   KindCounter,
		Labels: idLabels,
		Help:   "Events a subscription (reconciler.Subscription in Config.Observers) dropped because its reader fell behind and its buffer was full. The reconciler never waits for a reader.",
	}
	defObserverPanics = Definition{
		Name:   Prefix + "observer_panics_total",
		Kind:   KindCounter,
		Labels: idLabels,
		Help:   "Times an observer (Config.Observers) panicked; recovered, and the event lost to that observer. Any above zero is a bug in the observer.",
	}
	defFailing = Definition{
		Name:   Prefix + "failing_objects",
		Kind:   KindGauge,
		Labels: idLabels,
		Help:   "Objects whose last attempt failed (status Error), deletes included.",
	}
	defWaiting = Definition{
		Name:   Prefix + "waiting_objects",
		Kind:   KindGauge,
		Labels: idLabels,
		Help:   "Objects picked up whose result is not committed yet.",
	}
	defInFlight = Definition{
		Name:   Prefix + "in_flight_operations",
		Kind:   KindGauge,
		Labels: idLabels,
		Help:   "Operation calls running now (a batch counts once).",
	}
	defQueuedRetries = Definition{
		Name:   Prefix + "queued_retries",
		Kind:   KindGauge,
		Labels: idLabels,
		Help:   "Objects in the retry queue.",
	}
	defBlocked = Definition{
		Name:   Prefix + "blocked_objects",
		Kind:   KindGauge,
		Labels: idLabels,
		Help:   "Objects whose operation waits for its dependencies (Config.DependsOn): an Update for a dependency to be Done, a Delete for its dependents to be deleted. Not attempted, not failing.",
	}
	defOldestWaiting = Definition{
		Name:   Prefix + "oldest_waiting_seconds",
		Kind:   KindGauge,
		Labels: idLabels,
		Help:   "How long the longest-waiting picked-up object has waited for its result to be committed, as of the scrape; 0 when none waits.",
	}
)

// defOldestReady is labelled by priority too: reconcilers with
// Config.Priority, FairnessKey or TargetKey report one series per priority
// with ready requests.
var defOldestReady = Definition{
	Name:   Prefix + "oldest_ready_seconds",
	Kind:   KindGauge,
	Labels: []string{LabelModuleID, LabelName, LabelPriority},
	Help:   "With a priority, fairness key or target key: how long the longest-waiting ready request of each priority has waited; 0 when none waits.",
}

var definitions = []Definition{
	defOperations,
	defOperationObjects,
	defOperationDuration,
	defRoundObjects,
	defRoundDuration,
	defRealizationDuration,
	defFullDuration,
	defFullFailing,
	defRetriesScheduled,
	defUnreconciledWrites,
	defObserverDropped,
	defObserverPanics,
	defFailing,
	defWaiting,
	defInFlight,
	defQueuedRetries,
	defBlocked,
	defOldestWaiting,
	defOldestReady,
}

// Definitions returns every metric this package exports, in a stable
// order. The result is a copy: changing it changes nothing here.
func Definitions() []Definition {
	out := make([]Definition, len(definitions))
	for i, d := range definitions {
		d.Labels = append([]string(nil), d.Labels...)
		out[i] = d
	}
	return out
}

// durationBuckets are the upper bounds, in seconds, of every duration
// histogram: 100µs to 60s in 1-2.5-5 steps, so both a map update in
// microseconds and a slow remote API call land in a bucket of their own.
var durationBuckets = []float64{
	0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05,
	0.1, 0.25, 0.5,
	1, 2.5, 5,
	10, 30, 60,
}

// DurationBuckets returns a copy of the bucket upper bounds, in seconds, of
// every duration histogram but the realization one.
func DurationBuckets() []float64 { return append([]float64(nil), durationBuckets...) }

// realizationBuckets are the upper bounds, in seconds, of the realization
// histogram: those of durationBuckets, then 2 and 5 minutes. A change's
// realization includes its retries, whose backoff reaches a minute by
// default, so the tail goes further than an operation's.
var realizationBuckets = append(DurationBuckets(), 120, 300)

// RealizationBuckets returns a copy of the bucket upper bounds, in
// seconds, of converge_reconciler_realization_duration_seconds: 100µs to
// 5 minutes.
func RealizationBuckets() []float64 { return append([]float64(nil), realizationBuckets...) }

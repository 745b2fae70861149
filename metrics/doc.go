// Package metrics implements reconciler.Metrics twice, for Prometheus and
// for expvar, and provides a hive cell that gives every reconciler of an
// application one of them by default.
//
// # The two implementations
//
// Prometheus (NewPrometheus) registers the series listed in METRICS.md
// with the prometheus.Registerer it is given, and with nothing else:
// counters named ..._total, duration histograms named ..._seconds with
// buckets from 100µs to 60s, and gauges, all labelled module_id and name
// (and op and result where they apply). When a reconciler is constructed,
// every one of its label combinations is created at zero, so dashboards and
// alerts see the series before the first failure, and the series are
// resolved once: recording an operation does no lookup and allocates
// nothing.
//
// ExpVar (NewExpVar) carries the same information as expvar variables,
// under the process-wide map ExpVarName keyed by the reconciler's display
// name ("module_id" or "module_id/name"); the histograms become a count and
// a sum. NewUnpublishedExpVar publishes
// nothing, for tests.
//
// Definitions lists every metric, with its type, labels and meaning.
// metrics/alerts.yaml holds alerting rules and metrics/dashboard.json a
// Grafana dashboard built on them.
//
// # The cell
//
// One line in a hive gives every reconciler Prometheus metrics:
//
//	hive.New(
//		statedb.Cell,
//		job.Cell,
//		metrics.Cell,
//		...
//	)
//
// Cell provides reconciler.Metrics (which fills
// reconciler.Params.DefaultMetrics, used by every reconciler whose
// Config.Metrics is nil), the *prometheus.Registry the metrics live in, and
// the script command reconciler/metrics. The registry is a new one: nothing
// is registered globally unless NewCell(WithDefaultRegistry()) asks for
// it. ExpVarCell uses expvar instead.
//
// An application that already has a registry in its hive skips the cell
// and provides the interface itself:
//
//	cell.Provide(func(reg *prometheus.Registry) (reconciler.Metrics, error) {
//		return metrics.NewPrometheus(reg)
//	})
//
// (provide the interface type: a provider of *metrics.Prometheus does not
// fill an interface-typed field).
//
// # Serving /metrics
//
// Serve the provided registry with promhttp, for example from a cell.Invoke:
//
//	cell.Invoke(func(lc cell.Lifecycle, reg *prometheus.Registry) {
//		mux := http.NewServeMux()
//		mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//		srv := &http.Server{Addr: ":9090", Handler: mux}
//		lc.Append(cell.Hook{
//			OnStart: func(cell.HookContext) error { go srv.ListenAndServe(); return nil },
//			OnStop:  func(ctx cell.HookContext) error { return srv.Shutdown(ctx) },
//		})
//	})
//
// Add collectors.NewGoCollector() and collectors.NewProcessCollector to the
// registry for the usual process metrics. With ExpVarCell, serve
// expvar.Handler() at /debug/vars (importing expvar already does so on
// http.DefaultServeMux).
//
// # Script tests
//
// The script command reconciler/metrics prints the metrics of the hive's
// reconcilers in the Prometheus text format (with ExpVarCell: as JSON, one
// value a line). Its optional argument is a regexp; then only the lines it
// matches are printed:
//
//	reconciler/metrics 'operations_total.*op="update",result="ok"'
//	stdout ' 3$'
package metrics

package k8ssource

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/source"
)

// WriteOutcome is how one status write ended: the values of the metrics'
// outcome label.
type WriteOutcome string

// The outcomes of a status write.
const (
	WriteWritten  WriteOutcome = "written"   // the server took it
	WriteConflict WriteOutcome = "conflict"  // 409: retried
	WriteNotFound WriteOutcome = "not_found" // 404: the object is gone
	WriteFailed   WriteOutcome = "error"     // anything else: retried, and in health
)

// WriteOutcomes lists every WriteOutcome, in the order metrics create
// them.
var WriteOutcomes = []WriteOutcome{WriteWritten, WriteConflict, WriteNotFound, WriteFailed}

// Metrics hands out the metrics of each status writer. NewPrometheus
// implements it; nil in StatusConfig.Metrics means none.
type Metrics interface {
	// StatusWriter returns the metrics of the status writer of one
	// source, named as the source is; it is called once, when the
	// source is constructed.
	StatusWriter(id source.ID) StatusMetrics
}

// StatusMetrics receives one status writer's measurements, from its
// goroutine.
type StatusMetrics interface {
	// Write records one status write (a server-side apply) and how long
	// the request took.
	Write(outcome WriteOutcome, d time.Duration)
}

type nopStatusMetrics struct{}

func (nopStatusMetrics) Write(WriteOutcome, time.Duration) {}

// MetricsPrefix starts the name of every Prometheus metric of this
// package.
const MetricsPrefix = "converge_k8s_"

// Prometheus records the status writers' metrics as Prometheus series.
// Create it with NewPrometheus. Every series of a writer is created at
// zero when its source is constructed.
type Prometheus struct {
	writes   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	stuck    *prometheus.GaugeVec
	oldest   *prometheus.GaugeVec
}

// errNoRegisterer is returned by NewPrometheus and RegisterClientMetrics
// for a nil registerer.
var errNoRegisterer = errors.New("k8ssource: nil prometheus.Registerer")

// NewPrometheus creates the status writers' metrics and registers them
// with reg, and nowhere else:
//
//	converge_k8s_status_writes_total{module_id, name, outcome}
//	converge_k8s_status_write_duration_seconds{module_id, name}
//	converge_k8s_cleanup_stuck_objects{module_id, name}
//	converge_k8s_cleanup_stuck_oldest_timestamp_seconds{module_id, name}
//
// The last two are the objects a failing cleanup holds (Terminating with
// the finalizer while a Delete fails) and when the oldest of them was
// deleted (0 when none): alert on time() minus it.
//
// It fails for a nil reg, and with the registry's error when a metric of
// the same name is already registered.
func NewPrometheus(reg prometheus.Registerer) (*Prometheus, error) {
	if reg == nil {
		return nil, errNoRegisterer
	}
	p := &Prometheus{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricsPrefix + "status_writes_total",
			Help: "Status writes (server-side applies of the condition) by outcome: written, conflict, not_found, error.",
		}, []string{"module_id", "name", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricsPrefix + "status_write_duration_seconds",
			Help:    "How long one status write's request took, whatever its outcome.",
			Buckets: []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5, 30},
		}, []string{"module_id", "name"}),
	}
	p.stuck = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricsPrefix + "cleanup_stuck_objects",
		Help: "Objects held by a failing cleanup: being deleted with the finalizer while a Delete of their table objects fails.",
	}, []string{"module_id", "name"})
	p.oldest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: MetricsPrefix + "cleanup_stuck_oldest_timestamp_seconds",
		Help: "When the oldest object held by a failing cleanup was deleted, in Unix seconds; 0 when there is none.",
	}, []string{"module_id", "name"})
	var done []prometheus.Collector
	for _, c := range []prometheus.Collector{p.writes, p.duration, p.stuck, p.oldest} {
		if err := reg.Register(c); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, err
		}
		done = append(done, c)
	}
	return p, nil
}

// StatusWriter implements Metrics.
func (p *Prometheus) StatusWriter(id source.ID) StatusMetrics {
	m := &promStatus{duration: p.duration.WithLabelValues(id.ModuleID, id.Name),
		stuck: p.stuck.WithLabelValues(id.ModuleID, id.Name), oldest: p.oldest.WithLabelValues(id.ModuleID, id.Name)}
	for _, o := range WriteOutcomes {
		m.writes = append(m.writes, p.writes.WithLabelValues(id.ModuleID, id.Name, string(o)))
	}
	return m
}

type promStatus struct {
	writes        []prometheus.Counter // by WriteOutcomes' order
	duration      prometheus.Observer
	stuck, oldest prometheus.Gauge
}

// StuckCleanups implements CleanupMetrics.
func (m *promStatus) StuckCleanups(n int, oldest time.Time) {
	m.stuck.Set(float64(n))
	if oldest.IsZero() {
		m.oldest.Set(0)
	} else {
		m.oldest.Set(float64(oldest.UnixNano()) / 1e9)
	}
}

func (m *promStatus) Write(o WriteOutcome, d time.Duration) {
	for i, known := range WriteOutcomes {
		if known == o {
			m.writes[i].Inc()
		}
	}
	m.duration.Observe(d.Seconds())
}

package source

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/prometheus/client_golang/prometheus"
)

// MetricsPrefix starts the name of every Prometheus metric of this package.
const MetricsPrefix = "converge_source_"

// Prometheus records source metrics as Prometheus series. Create it with
// NewPrometheus; it is safe for concurrent use. Every series of a source
// is created at zero when the source is constructed, so that dashboards
// and alerts see it before the first event.
type Prometheus struct {
	events  *prometheus.CounterVec
	commits *prometheus.CounterVec
	writes  *prometheus.CounterVec
	relists *prometheus.CounterVec
	errors  *prometheus.CounterVec
	commitD *prometheus.HistogramVec
	relistD *prometheus.HistogramVec
	lag     *lagCollector
}

var idLabels = []string{"module_id", "name"}

// ErrNoRegisterer is returned by NewPrometheus for a nil registerer.
var ErrNoRegisterer = errors.New("source: nil prometheus.Registerer")

// NewPrometheus creates the source metrics and registers them with reg,
// and nowhere else. It fails with ErrNoRegisterer for a nil reg, and with
// the registry's error when a metric of the same name is already
// registered.
func NewPrometheus(reg prometheus.Registerer) (*Prometheus, error) {
	if reg == nil {
		return nil, ErrNoRegisterer
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricsPrefix + name, Help: help}, append(idLabels[:2:2], labels...))
	}
	buckets := []float64{0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30}
	histogram := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricsPrefix + name, Help: help, Buckets: buckets}, idLabels)
	}
	p := &Prometheus{
		events:  counter("events_total", "Events received from the watch, by kind (upsert, delete, bookmark), before coalescing.", "kind"),
		commits: counter("commits_total", "Batches of events committed (a batch that changed nothing counts too)."),
		writes:  counter("objects_written_total", "Rows written (op=upsert) or deleted (op=delete) in the table, by events and relists. Unchanged objects are not written.", "op"),
		relists: counter("relists_total", "Lists (successful or not), by reason: initial, expired, overflow, reconnect, resync, retry.", "reason"),
		errors:  counter("errors_total", "Failures by stage: list, watch, transform.", "stage"),
		commitD: histogram("commit_duration_seconds", "How long committing one batch of events took, transforms included."),
		relistD: histogram("relist_duration_seconds", "How long one list and replace took, the list call included."),
		lag:     &lagCollector{desc: prometheus.NewDesc(MetricsPrefix+"lag_seconds", "Age of the oldest event received but not committed yet; 0 when none waits.", idLabels, nil)},
	}
	cs := []prometheus.Collector{p.events, p.commits, p.writes, p.relists, p.errors, p.commitD, p.relistD, p.lag}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return nil, err
		}
	}
	return p, nil
}

// Source implements Metrics.
func (p *Prometheus) Source(id ID) SourceMetrics {
	m := &promSource{oldest: p.lag.add(id)}
	for _, k := range EventKinds {
		m.events[k] = p.events.WithLabelValues(id.ModuleID, id.Name, k.String())
	}
	m.commits = p.commits.WithLabelValues(id.ModuleID, id.Name)
	m.upserts = p.writes.WithLabelValues(id.ModuleID, id.Name, "upsert")
	m.deletes = p.writes.WithLabelValues(id.ModuleID, id.Name, "delete")
	m.relists = map[RelistReason]prometheus.Counter{}
	for _, r := range RelistReasons {
		m.relists[r] = p.relists.WithLabelValues(id.ModuleID, id.Name, string(r))
	}
	m.errors = map[Stage]prometheus.Counter{}
	for _, s := range Stages {
		m.errors[s] = p.errors.WithLabelValues(id.ModuleID, id.Name, string(s))
	}
	m.commitD = p.commitD.WithLabelValues(id.ModuleID, id.Name)
	m.relistD = p.relistD.WithLabelValues(id.ModuleID, id.Name)
	return m
}

type promSource struct {
	events           [3]prometheus.Counter
	commits          prometheus.Counter
	upserts, deletes prometheus.Counter
	relists          map[RelistReason]prometheus.Counter
	errors           map[Stage]prometheus.Counter
	commitD, relistD prometheus.Observer
	oldest           *atomic.Int64
}

func (m *promSource) Event(k EventKind) {
	if int(k) < len(m.events) {
		m.events[k].Inc()
	}
}

func (m *promSource) Commit(upserts, deletes int, d time.Duration) {
	m.commits.Inc()
	m.upserts.Add(float64(upserts))
	m.deletes.Add(float64(deletes))
	m.commitD.Observe(d.Seconds())
}

func (m *promSource) Relist(reason RelistReason, upserts, deletes int, d time.Duration) {
	if c, ok := m.relists[reason]; ok {
		c.Inc()
	}
	m.upserts.Add(float64(upserts))
	m.deletes.Add(float64(deletes))
	m.relistD.Observe(d.Seconds())
}

func (m *promSource) Error(s Stage) {
	if c, ok := m.errors[s]; ok {
		c.Inc()
	}
}

func (m *promSource) Lag(oldest time.Time) {
	if oldest.IsZero() {
		m.oldest.Store(0)
	} else {
		m.oldest.Store(oldest.UnixNano())
	}
}

// lagCollector computes each source's lag when scraped, from the arrival
// of its oldest uncommitted event, so the gauge grows while a commit is
// stuck instead of showing the value of the last update.
type lagCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	ids  map[ID]*atomic.Int64
}

func (c *lagCollector) add(id ID) *atomic.Int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ids == nil {
		c.ids = map[ID]*atomic.Int64{}
	}
	if v, ok := c.ids[id]; ok {
		return v
	}
	v := new(atomic.Int64)
	c.ids[id] = v
	return v
}

func (c *lagCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *lagCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for id, v := range c.ids {
		lag := 0.0
		if ns := v.Load(); ns != 0 {
			lag = now.Sub(time.Unix(0, ns)).Seconds()
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, lag, id.ModuleID, id.Name)
	}
}

// PrometheusCell provides the Metrics that every source of the hive uses
// when its Config.Metrics is nil: NewPrometheus on the hive's
// *prometheus.Registry, which converge's metrics.Cell provides. It fails
// the hive's construction when the registry already holds metrics of the
// same names.
var PrometheusCell = cell.Provide(func(reg *prometheus.Registry) (Metrics, error) {
	return NewPrometheus(reg)
})

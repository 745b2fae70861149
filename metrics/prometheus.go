package metrics

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/converge-go/converge/reconciler"
)

// Prometheus records reconciler metrics as Prometheus series (see
// METRICS.md). Create it with NewPrometheus; it is safe for concurrent use.
type Prometheus struct {
	operations        *prometheus.CounterVec
	operationObjects  *prometheus.CounterVec
	operationDuration *prometheus.HistogramVec
	roundObjects      *prometheus.CounterVec
	roundDuration     *prometheus.HistogramVec
	realization       *prometheus.HistogramVec
	fullDuration      *prometheus.HistogramVec
	fullFailing       *prometheus.GaugeVec
	retriesScheduled  *prometheus.CounterVec
	unreconciled      *prometheus.CounterVec
	observerDropped   *prometheus.CounterVec
	observerPanics    *prometheus.CounterVec
	oldestReady       *prometheus.GaugeVec
	failing           *prometheus.GaugeVec
	waiting           *prometheus.GaugeVec
	inFlight          *prometheus.GaugeVec
	queuedRetries     *prometheus.GaugeVec
	blocked           *prometheus.GaugeVec
	oldestWaiting     *oldestWaitingCollector

	mu          sync.Mutex
	reconcilers map[reconciler.ReconcilerID]*promReconciler
}

var _ reconciler.Metrics = (*Prometheus)(nil)

// NewPrometheus creates the metrics of METRICS.md and registers them with
// reg. Nothing is registered anywhere else: pass prometheus.DefaultRegisterer
// to use the global registry, or a prometheus.NewRegistry() to keep them
// apart.
//
// Constructing two on one registry works: the second finds the first's
// collectors already registered and shares them, so both report into the
// same series. It fails with ErrNoRegisterer when reg is nil, and with the
// registry's error when reg holds a different metric of the same name; then
// nothing it registered stays registered.
func NewPrometheus(reg prometheus.Registerer) (*Prometheus, error) {
	if reg == nil {
		return nil, ErrNoRegisterer
	}
	r := registrar{reg: reg}
	p := &Prometheus{reconcilers: map[reconciler.ReconcilerID]*promReconciler{}}
	p.operations = register(&r, counterVec(defOperations))
	p.operationObjects = register(&r, counterVec(defOperationObjects))
	p.operationDuration = register(&r, histogramVec(defOperationDuration, durationBuckets))
	p.roundObjects = register(&r, counterVec(defRoundObjects))
	p.roundDuration = register(&r, histogramVec(defRoundDuration, durationBuckets))
	p.realization = register(&r, histogramVec(defRealizationDuration, realizationBuckets))
	p.fullDuration = register(&r, histogramVec(defFullDuration, durationBuckets))
	p.fullFailing = register(&r, gaugeVec(defFullFailing))
	p.retriesScheduled = register(&r, counterVec(defRetriesScheduled))
	p.unreconciled = register(&r, counterVec(defUnreconciledWrites))
	p.observerDropped = register(&r, counterVec(defObserverDropped))
	p.observerPanics = register(&r, counterVec(defObserverPanics))
	p.oldestReady = register(&r, gaugeVec(defOldestReady))
	p.failing = register(&r, gaugeVec(defFailing))
	p.waiting = register(&r, gaugeVec(defWaiting))
	p.inFlight = register(&r, gaugeVec(defInFlight))
	p.queuedRetries = register(&r, gaugeVec(defQueuedRetries))
	p.blocked = register(&r, gaugeVec(defBlocked))
	p.oldestWaiting = register(&r, newOldestWaitingCollector(defOldestWaiting))
	if r.err != nil {
		r.undo()
		return nil, r.err
	}
	return p, nil
}

// Reconciler implements reconciler.Metrics. It creates every series of the
// reconciler, each label combination at zero, so that dashboards and alerts
// see them before the first event, and resolves them once: the calls on the
// result do no lookups and allocate nothing. Calling it again with the same
// id returns the same series.
func (p *Prometheus) Reconciler(id reconciler.ReconcilerID) reconciler.ReconcilerMetrics {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m, ok := p.reconcilers[id]; ok {
		return m
	}
	m := &promReconciler{
		operations: make([]prometheus.Counter, len(ops)*len(results)),
		objects:    make([]prometheus.Counter, len(ops)*len(results)),
		durations:  make([]prometheus.Observer, len(ops)),
	}
	for oi, op := range ops {
		m.durations[oi] = p.operationDuration.WithLabelValues(id.ModuleID, id.Name, string(op))
		for ri, res := range results {
			i := oi*len(results) + ri
			m.operations[i] = p.operations.WithLabelValues(id.ModuleID, id.Name, string(op), string(res))
			m.objects[i] = p.operationObjects.WithLabelValues(id.ModuleID, id.Name, string(op), string(res))
		}
	}
	m.roundObjects = p.roundObjects.WithLabelValues(id.ModuleID, id.Name)
	m.roundDuration = p.roundDuration.WithLabelValues(id.ModuleID, id.Name)
	m.realization = p.realization.WithLabelValues(id.ModuleID, id.Name)
	m.fullDuration = p.fullDuration.WithLabelValues(id.ModuleID, id.Name)
	m.fullFailing = p.fullFailing.WithLabelValues(id.ModuleID, id.Name)
	m.retriesScheduled = p.retriesScheduled.WithLabelValues(id.ModuleID, id.Name)
	m.unreconciled = p.unreconciled.WithLabelValues(id.ModuleID, id.Name)
	m.observerDropped = p.observerDropped.WithLabelValues(id.ModuleID, id.Name)
	m.observerPanics = p.observerPanics.WithLabelValues(id.ModuleID, id.Name)
	m.oldestReady, m.id = p.oldestReady, id
	m.oldestReady.WithLabelValues(id.ModuleID, id.Name, "0") // the default priority, at zero from the start
	m.failing = p.failing.WithLabelValues(id.ModuleID, id.Name)
	m.waiting = p.waiting.WithLabelValues(id.ModuleID, id.Name)
	m.inFlight = p.inFlight.WithLabelValues(id.ModuleID, id.Name)
	m.queuedRetries = p.queuedRetries.WithLabelValues(id.ModuleID, id.Name)
	m.blocked = p.blocked.WithLabelValues(id.ModuleID, id.Name)
	m.clock = p.oldestWaiting.clock(id)
	p.reconcilers[id] = m
	return m
}

// promReconciler is one reconciler's resolved series. operations and
// objects are indexed by opResultIndex, durations by opIndex.
type promReconciler struct {
	operations       []prometheus.Counter
	objects          []prometheus.Counter
	durations        []prometheus.Observer
	roundObjects     prometheus.Counter
	roundDuration    prometheus.Observer
	realization      prometheus.Observer
	fullDuration     prometheus.Observer
	fullFailing      prometheus.Gauge
	retriesScheduled prometheus.Counter
	unreconciled     prometheus.Counter
	observerDropped  prometheus.Counter
	observerPanics   prometheus.Counter
	oldestReady      *prometheus.GaugeVec
	id               reconciler.ReconcilerID
	// readyPriorities are the priorities last reported ready: one no
	// longer ready is set to 0.
	readyPriorities map[int]bool
	failing         prometheus.Gauge
	waiting         prometheus.Gauge
	inFlight        prometheus.Gauge
	queuedRetries   prometheus.Gauge
	blocked         prometheus.Gauge
	clock           *waitClock
}

// Operation implements reconciler.ReconcilerMetrics.
func (m *promReconciler) Operation(op reconciler.Op, result reconciler.Result, objects int, d time.Duration) {
	oi, i := opResultIndex(op, result)
	if i < 0 {
		return
	}
	m.operations[i].Inc()
	if objects > 0 {
		m.objects[i].Add(float64(objects))
	}
	m.durations[oi].Observe(d.Seconds())
}

// BatchEntries implements reconciler.ReconcilerMetrics.
func (m *promReconciler) BatchEntries(op reconciler.Op, result reconciler.Result, n int) {
	if _, i := opResultIndex(op, result); i >= 0 && n > 0 {
		m.objects[i].Add(float64(n))
	}
}

// Round implements reconciler.ReconcilerMetrics.
func (m *promReconciler) Round(objects int, d time.Duration) {
	if objects > 0 {
		m.roundObjects.Add(float64(objects))
	}
	m.roundDuration.Observe(d.Seconds())
}

// Realized implements reconciler.ReconcilerMetrics.
func (m *promReconciler) Realized(latencies []time.Duration) {
	for _, d := range latencies {
		m.realization.Observe(d.Seconds())
	}
}

// FullReconciliation implements reconciler.ReconcilerMetrics.
func (m *promReconciler) FullReconciliation(d time.Duration, err error) {
	m.fullDuration.Observe(d.Seconds())
	if err != nil {
		m.fullFailing.Set(1)
	} else {
		m.fullFailing.Set(0)
	}
}

// RetryScheduled implements reconciler.ReconcilerMetrics.
func (m *promReconciler) RetryScheduled() { m.retriesScheduled.Inc() }

// UnreconciledWrite implements reconciler.ReconcilerMetrics.
func (m *promReconciler) UnreconciledWrite() { m.unreconciled.Inc() }

// ObserverDropped implements reconciler.ObserverMetrics.
func (m *promReconciler) ObserverDropped(n int) { m.observerDropped.Add(float64(n)) }

// ObserverPanicked implements reconciler.ObserverMetrics.
func (m *promReconciler) ObserverPanicked() { m.observerPanics.Inc() }

var _ reconciler.ObserverMetrics = (*promReconciler)(nil)

// Gauges implements reconciler.ReconcilerMetrics.
func (m *promReconciler) Gauges(g reconciler.Gauges) {
	m.failing.Set(float64(g.Failing))
	m.waiting.Set(float64(g.Waiting))
	m.inFlight.Set(float64(g.InFlight))
	m.queuedRetries.Set(float64(g.Retries))
	m.blocked.Set(float64(g.Blocked))
	m.clock.set(g, time.Now())
}

// ReadyWaits implements reconciler.ReconcilerMetrics: one series per
// priority ready; a priority no longer ready is set to 0.
func (m *promReconciler) ReadyWaits(waits []reconciler.ReadyWait) {
	if len(waits) == 0 && len(m.readyPriorities) == 0 {
		return
	}
	seen := make(map[int]bool, len(waits))
	for _, w := range waits {
		seen[w.Priority] = true
		m.oldestReady.WithLabelValues(m.id.ModuleID, m.id.Name, strconv.Itoa(w.Priority)).Set(w.Oldest.Seconds())
	}
	for p := range m.readyPriorities {
		if !seen[p] {
			m.oldestReady.WithLabelValues(m.id.ModuleID, m.id.Name, strconv.Itoa(p)).Set(0)
		}
	}
	m.readyPriorities = seen
}

func counterVec(d Definition) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
}

func gaugeVec(d Definition) *prometheus.GaugeVec {
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d.Name, Help: d.Help}, d.Labels)
}

func histogramVec(d Definition, buckets []float64) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.Name, Help: d.Help, Buckets: buckets}, d.Labels)
}

// registrar registers collectors until the first error, remembering what
// it registered so that a failed NewPrometheus can take it back.
type registrar struct {
	reg   prometheus.Registerer
	added []prometheus.Collector
	err   error
}

// register registers c with r.reg and returns it, or the equal collector
// already registered there.
func register[C prometheus.Collector](r *registrar, c C) C {
	if r.err != nil {
		return c
	}
	err := r.reg.Register(c)
	if err == nil {
		r.added = append(r.added, c)
		return c
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	r.err = fmt.Errorf("registering converge reconciler metrics: %w", err)
	return c
}

func (r *registrar) undo() {
	for _, c := range r.added {
		r.reg.Unregister(c)
	}
}

// oldestWaitingCollector reports defOldestWaiting, computed at scrape time
// from each reconciler's waitClock (see waitClock for why).
type oldestWaitingCollector struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	clocks map[reconciler.ReconcilerID]*waitClock
}

func newOldestWaitingCollector(d Definition) *oldestWaitingCollector {
	return &oldestWaitingCollector{
		desc:   prometheus.NewDesc(d.Name, d.Help, d.Labels, nil),
		clocks: map[reconciler.ReconcilerID]*waitClock{},
	}
}

// clock returns id's clock, creating it.
func (c *oldestWaitingCollector) clock(id reconciler.ReconcilerID) *waitClock {
	c.mu.Lock()
	defer c.mu.Unlock()
	clk, ok := c.clocks[id]
	if !ok {
		clk = &waitClock{}
		c.clocks[id] = clk
	}
	return clk
}

// Describe implements prometheus.Collector.
func (c *oldestWaitingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *oldestWaitingCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ids := make([]reconciler.ReconcilerID, 0, len(c.clocks))
	clocks := make([]*waitClock, 0, len(c.clocks))
	for id, clk := range c.clocks {
		ids = append(ids, id)
		clocks = append(clocks, clk)
	}
	c.mu.Unlock()
	now := time.Now()
	for i, id := range ids {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, clocks[i].age(now).Seconds(), id.ModuleID, id.Name)
	}
}

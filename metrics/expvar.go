package metrics

import (
	"expvar"
	"strconv"
	"sync"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// ExpVarName is the expvar variable NewExpVar publishes: a map from each
// reconciler's display name ("module_id", or "module_id/name" when it has
// a name; see reconciler.ReconcilerID.DisplayName) to its metrics.
const ExpVarName = "converge_reconcilers"

// ExpVar records reconciler metrics as expvar variables: per reconciler, a
// map whose keys are the metric names of METRICS.md without Prefix. Counters
// by op and result nest as {op: {result: n}}; histograms become
// {"count": n, "sum": seconds} (by op where the Prometheus histogram has
// an op label). Create it with NewExpVar or NewUnpublishedExpVar; it is
// safe for concurrent use.
//
// ExpVar is itself an expvar.Var: String returns the JSON of its own
// reconcilers, keyed by display name as under ExpVarName.
type ExpVar struct {
	vars      *expvar.Map // this ExpVar's reconcilers
	published *expvar.Map // the process-wide map, or nil

	mu          sync.Mutex
	reconcilers map[reconciler.ReconcilerID]*expvarReconciler
}

var (
	_ reconciler.Metrics = (*ExpVar)(nil)
	_ expvar.Var         = (*ExpVar)(nil)
)

var (
	publishOnce  sync.Once
	publishedMap *expvar.Map
)

// published returns the process-wide map, publishing it under ExpVarName
// on first use. expvar.Publish panics on a second publication of a name, so
// this happens once per process; if something else already took the name
// with a variable of another type, NewExpVar's reconcilers stay unpublished
// rather than panic.
func published() *expvar.Map {
	publishOnce.Do(func() {
		switch v := expvar.Get(ExpVarName).(type) {
		case nil:
			publishedMap = expvar.NewMap(ExpVarName)
		case *expvar.Map:
			publishedMap = v
		}
	})
	return publishedMap
}

// NewExpVar returns an ExpVar whose reconcilers are also published in the
// process-wide expvar map ExpVarName (served by expvar's /debug/vars).
// Constructing several in one process is fine: they share that map, and a
// reconciler constructed later replaces an earlier one with the same
// module_id and name there (a restarted hive replaces its predecessor).
func NewExpVar() *ExpVar {
	e := NewUnpublishedExpVar()
	e.published = published()
	return e
}

// NewUnpublishedExpVar returns an ExpVar that publishes nothing: read it
// through its String method. Use it in tests, or to publish under a name
// of your own with expvar.Publish.
func NewUnpublishedExpVar() *ExpVar {
	return &ExpVar{
		vars:        new(expvar.Map),
		reconcilers: map[reconciler.ReconcilerID]*expvarReconciler{},
	}
}

// String implements expvar.Var: the JSON of this ExpVar's reconcilers.
func (e *ExpVar) String() string { return e.vars.String() }

// Reconciler implements reconciler.Metrics. It creates the reconciler's
// variables, every op and result at zero, and resolves them once: the calls
// on the result do no lookups and allocate nothing. Calling it again with
// the same id returns the same variables.
func (e *ExpVar) Reconciler(id reconciler.ReconcilerID) reconciler.ReconcilerMetrics {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m, ok := e.reconcilers[id]; ok {
		return m
	}
	m := newExpvarReconciler()
	e.reconcilers[id] = m
	e.vars.Set(idKey(id), m.vars)
	if e.published != nil {
		e.published.Set(idKey(id), m.vars)
	}
	return m
}

// histogramVar is a histogram reduced to what expvar can carry.
type histogramVar struct {
	count expvar.Int
	sum   expvar.Float // seconds
}

func (h *histogramVar) observe(d time.Duration) {
	h.count.Add(1)
	h.sum.Add(d.Seconds())
}

func (h *histogramVar) publish() *expvar.Map {
	m := new(expvar.Map)
	m.Set("count", &h.count)
	m.Set("sum", &h.sum)
	return m
}

// expvarReconciler is one reconciler's variables; operations and objects
// are indexed by opResultIndex, durations by opIndex.
type expvarReconciler struct {
	vars *expvar.Map

	operations       []expvar.Int
	objects          []expvar.Int
	durations        []histogramVar
	roundObjects     expvar.Int
	roundDuration    histogramVar
	realization      histogramVar
	fullDuration     histogramVar
	fullFailing      expvar.Int
	retriesScheduled expvar.Int
	unreconciled     expvar.Int
	observerDropped  expvar.Int
	observerPanics   expvar.Int
	oldestReady      expvar.Map // seconds, by priority
	ready            map[int]*expvar.Float
	failing          expvar.Int
	waiting          expvar.Int
	inFlight         expvar.Int
	queuedRetries    expvar.Int
	blocked          expvar.Int
	clock            waitClock
}

func newExpvarReconciler() *expvarReconciler {
	m := &expvarReconciler{
		vars:       new(expvar.Map),
		operations: make([]expvar.Int, len(ops)*len(results)),
		objects:    make([]expvar.Int, len(ops)*len(results)),
		durations:  make([]histogramVar, len(ops)),
	}
	byOpResult := func(vars []expvar.Int) *expvar.Map {
		top := new(expvar.Map)
		for oi, op := range ops {
			sub := new(expvar.Map)
			for ri, res := range results {
				sub.Set(string(res), &vars[oi*len(results)+ri])
			}
			top.Set(string(op), sub)
		}
		return top
	}
	durations := new(expvar.Map)
	for oi, op := range ops {
		durations.Set(string(op), m.durations[oi].publish())
	}
	m.vars.Set(defOperations.Short(), byOpResult(m.operations))
	m.vars.Set(defOperationObjects.Short(), byOpResult(m.objects))
	m.vars.Set(defOperationDuration.Short(), durations)
	m.vars.Set(defRoundObjects.Short(), &m.roundObjects)
	m.vars.Set(defRoundDuration.Short(), m.roundDuration.publish())
	m.vars.Set(defRealizationDuration.Short(), m.realization.publish())
	m.vars.Set(defFullDuration.Short(), m.fullDuration.publish())
	m.vars.Set(defFullFailing.Short(), &m.fullFailing)
	m.vars.Set(defRetriesScheduled.Short(), &m.retriesScheduled)
	m.vars.Set(defUnreconciledWrites.Short(), &m.unreconciled)
	m.vars.Set(defObserverDropped.Short(), &m.observerDropped)
	m.vars.Set(defObserverPanics.Short(), &m.observerPanics)
	m.vars.Set(defOldestReady.Short(), &m.oldestReady)
	m.ready = map[int]*expvar.Float{0: new(expvar.Float)} // the default priority, at zero from the start
	m.oldestReady.Set("0", m.ready[0])
	m.vars.Set(defFailing.Short(), &m.failing)
	m.vars.Set(defWaiting.Short(), &m.waiting)
	m.vars.Set(defInFlight.Short(), &m.inFlight)
	m.vars.Set(defQueuedRetries.Short(), &m.queuedRetries)
	m.vars.Set(defBlocked.Short(), &m.blocked)
	m.vars.Set(defOldestWaiting.Short(), oldestVar{&m.clock})
	return m
}

// oldestVar shows a waitClock's age, in seconds, when expvar is read.
type oldestVar struct{ clock *waitClock }

func (v oldestVar) String() string {
	return strconv.FormatFloat(v.clock.age(time.Now()).Seconds(), 'g', -1, 64)
}

// Operation implements reconciler.ReconcilerMetrics.
func (m *expvarReconciler) Operation(op reconciler.Op, result reconciler.Result, objects int, d time.Duration) {
	oi, i := opResultIndex(op, result)
	if i < 0 {
		return
	}
	m.operations[i].Add(1)
	m.objects[i].Add(int64(objects))
	m.durations[oi].observe(d)
}

// BatchEntries implements reconciler.ReconcilerMetrics.
func (m *expvarReconciler) BatchEntries(op reconciler.Op, result reconciler.Result, n int) {
	if _, i := opResultIndex(op, result); i >= 0 {
		m.objects[i].Add(int64(n))
	}
}

// Round implements reconciler.ReconcilerMetrics.
func (m *expvarReconciler) Round(objects int, d time.Duration) {
	m.roundObjects.Add(int64(objects))
	m.roundDuration.observe(d)
}

// Realized implements reconciler.ReconcilerMetrics.
func (m *expvarReconciler) Realized(latencies []time.Duration) {
	for _, d := range latencies {
		m.realization.observe(d)
	}
}

// FullReconciliation implements reconciler.ReconcilerMetrics.
func (m *expvarReconciler) FullReconciliation(d time.Duration, err error) {
	m.fullDuration.observe(d)
	if err != nil {
		m.fullFailing.Set(1)
	} else {
		m.fullFailing.Set(0)
	}
}

// RetryScheduled implements reconciler.ReconcilerMetrics.
func (m *expvarReconciler) RetryScheduled() { m.retriesScheduled.Add(1) }

// UnreconciledWrite implements reconciler.ReconcilerMetrics.
func (m *expvarReconciler) UnreconciledWrite() { m.unreconciled.Add(1) }

// ObserverDropped implements reconciler.ObserverMetrics.
func (m *expvarReconciler) ObserverDropped(n int) { m.observerDropped.Add(int64(n)) }

// ObserverPanicked implements reconciler.ObserverMetrics.
func (m *expvarReconciler) ObserverPanicked() { m.observerPanics.Add(1) }

var _ reconciler.ObserverMetrics = (*expvarReconciler)(nil)

// ReadyWaits implements reconciler.ReconcilerMetrics: one variable per
// priority ever ready, 0 while none of it waits (as the Prometheus gauge).
func (m *expvarReconciler) ReadyWaits(waits []reconciler.ReadyWait) {
	for _, f := range m.ready {
		f.Set(0)
	}
	for _, w := range waits {
		f := m.ready[w.Priority]
		if f == nil {
			f = new(expvar.Float)
			m.ready[w.Priority] = f
			m.oldestReady.Set(strconv.Itoa(w.Priority), f)
		}
		f.Set(w.Oldest.Seconds())
	}
}

// Gauges implements reconciler.ReconcilerMetrics.
func (m *expvarReconciler) Gauges(g reconciler.Gauges) {
	m.failing.Set(int64(g.Failing))
	m.waiting.Set(int64(g.Waiting))
	m.inFlight.Set(int64(g.InFlight))
	m.queuedRetries.Set(int64(g.Retries))
	m.blocked.Set(int64(g.Blocked))
	m.clock.set(g, time.Now())
}

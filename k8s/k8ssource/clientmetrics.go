package k8ssource

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientmetrics "k8s.io/client-go/tools/metrics"
)

// ErrClientMetricsTaken is returned by RegisterClientMetrics when
// another package installed client-go's metrics first (controller-runtime
// does, into its own registry, when its metrics package is linked):
// client-go takes one set per process.
var ErrClientMetricsTaken = errors.New("client-go's metrics are installed by another package")

// clientSinks is the set of client-go metrics installed into client-go:
// client-go keeps one per process, so this one forwards to the series of
// every registry RegisterClientMetrics was given.
var clientSinks = &clientAdapter{}

// RegisterClientMetrics has client-go's REST client report every
// request of the process into reg:
//
//	converge_k8s_rest_client_requests_total{code, method, host}
//	converge_k8s_rest_client_request_duration_seconds{verb, host}
//	converge_k8s_rest_client_rate_limiter_duration_seconds{verb, host}
//	converge_k8s_rest_client_retries_total{code, method, host}
//
// client-go's metrics are per process, not per client: the first call
// installs them into client-go, and each call adds reg to the registries
// they report to. client-go reads them without synchronization: make the
// first call before any client of the process makes a request (first
// thing in main). It fails with ErrClientMetricsTaken when another
// package installed client-go's metrics first, for a nil reg, and with
// the registry's error when a metric of the same name is already
// registered.
func RegisterClientMetrics(reg prometheus.Registerer) error {
	if reg == nil {
		return errNoRegisterer
	}
	clientmetrics.Register(clientmetrics.RegisterOpts{
		RequestLatency:     latencyAdapter{clientSinks, false},
		RateLimiterLatency: latencyAdapter{clientSinks, true},
		RequestResult:      resultAdapter{clientSinks},
		RequestRetry:       resultAdapter{clientSinks},
	})
	if ra, ok := clientmetrics.RequestResult.(resultAdapter); !ok || ra.a != clientSinks {
		return ErrClientMetricsTaken
	}
	s := &clientSeries{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricsPrefix + "rest_client_requests_total",
			Help: "Requests of client-go's REST clients, by HTTP status code (or <error>), method and host."}, []string{"code", "method", "host"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricsPrefix + "rest_client_retries_total",
			Help: "Requests client-go's REST clients retried, by status code, method and host."}, []string{"code", "method", "host"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricsPrefix + "rest_client_request_duration_seconds",
			Help: "Latency of client-go's REST requests, by verb and host.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"verb", "host"}),
		limiter: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricsPrefix + "rest_client_rate_limiter_duration_seconds",
			Help: "Time client-go's REST requests waited for the client's rate limiter (QPS, Burst), by verb and host.", Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}, []string{"verb", "host"}),
	}
	cs := []prometheus.Collector{s.requests, s.retries, s.latency, s.limiter}
	for i, c := range cs {
		if err := reg.Register(c); err != nil {
			for _, done := range cs[:i] {
				reg.Unregister(done)
			}
			return err
		}
	}
	clientSinks.add(s)
	return nil
}

// clientSeries are one registry's series of client-go's metrics.
type clientSeries struct {
	requests, retries *prometheus.CounterVec
	latency, limiter  *prometheus.HistogramVec
}

type clientAdapter struct {
	mu     sync.RWMutex
	series []*clientSeries
}

func (a *clientAdapter) add(s *clientSeries) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.series = append(a.series, s)
}

func (a *clientAdapter) each(fn func(*clientSeries)) {
	a.mu.RLock()
	defer a.mu.RUnlock()
	for _, s := range a.series {
		fn(s)
	}
}

// latencyAdapter is client-go's LatencyMetric: of the requests, or of
// the rate limiter's wait.
type latencyAdapter struct {
	a       *clientAdapter
	limiter bool
}

func (l latencyAdapter) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	l.a.each(func(s *clientSeries) {
		h := s.latency
		if l.limiter {
			h = s.limiter
		}
		h.WithLabelValues(verb, u.Host).Observe(d.Seconds())
	})
}

// resultAdapter is client-go's ResultMetric (requests) and RetryMetric.
type resultAdapter struct{ a *clientAdapter }

func (r resultAdapter) Increment(_ context.Context, code, method, host string) {
	r.a.each(func(s *clientSeries) { s.requests.WithLabelValues(code, method, host).Inc() })
}

func (r resultAdapter) IncrementRetry(_ context.Context, code, method, host string) {
	r.a.each(func(s *clientSeries) { s.retries.WithLabelValues(code, method, host).Inc() })
}

package statedbcompat_test

import (
	"testing"
	"time"

	sdbreconciler "github.com/cilium/statedb/reconciler"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/reconciler/statedbcompat"
)

// TestConfigOptions checks that each of the incumbent's options means in
// the converge Config what it means in statedb's reconciler, zero and nil
// arguments included.
func TestConfigOptions(t *testing.T) {
	limiter := rate.NewLimiter(5, 2)
	build := func(opts ...statedbcompat.Option) reconciler.Config[*obj] {
		return statedbcompat.Config[*obj](nil, nil, nil, nil, nil, nil, opts...)
	}
	unlimited := func(l *rate.Limiter) bool { return l != nil && l.Limit() == rate.Inf }
	cases := []struct {
		name  string
		opts  []statedbcompat.Option
		check func(reconciler.Config[*obj]) bool
	}{
		{"defaults are the incumbent's", nil, func(c reconciler.Config[*obj]) bool {
			return c.FullReconciliationInterval == time.Hour && c.RefreshInterval == 30*time.Minute &&
				c.RefreshRateLimiter.Limit() == 100 && c.RefreshRateLimiter.Burst() == 1 &&
				c.RetryBackoffMin == 100*time.Millisecond && c.RetryBackoffMax == time.Minute &&
				c.RoundSize == 1000 && c.RoundRateLimiter.Limit() == 1000 && c.RoundRateLimiter.Burst() == 1 &&
				c.Metrics == nil && c.Name == ""
		}},
		{"WithName", []statedbcompat.Option{statedbcompat.WithName("routes")}, func(c reconciler.Config[*obj]) bool {
			return c.Name == "routes"
		}},
		{"WithPruning", []statedbcompat.Option{statedbcompat.WithPruning(time.Minute)}, func(c reconciler.Config[*obj]) bool {
			return c.FullReconciliationInterval == time.Minute && c.RefreshInterval == 30*time.Minute
		}},
		{"WithPruning(0) is off", []statedbcompat.Option{statedbcompat.WithPruning(0)}, func(c reconciler.Config[*obj]) bool {
			return c.FullReconciliationInterval == reconciler.Off
		}},
		{"WithoutPruning keeps refresh", []statedbcompat.Option{statedbcompat.WithoutPruning()}, func(c reconciler.Config[*obj]) bool {
			return c.FullReconciliationInterval == reconciler.Off && c.RefreshInterval == 30*time.Minute
		}},
		{"WithRefreshing", []statedbcompat.Option{statedbcompat.WithRefreshing(time.Minute, limiter)}, func(c reconciler.Config[*obj]) bool {
			return c.RefreshInterval == time.Minute && c.RefreshRateLimiter == limiter
		}},
		{"WithRefreshing nil limiter is unlimited", []statedbcompat.Option{statedbcompat.WithRefreshing(time.Minute, nil)}, func(c reconciler.Config[*obj]) bool {
			return c.RefreshInterval == time.Minute && unlimited(c.RefreshRateLimiter)
		}},
		{"WithRefreshing(0) is off", []statedbcompat.Option{statedbcompat.WithRefreshing(0, nil)}, func(c reconciler.Config[*obj]) bool {
			return c.RefreshInterval == reconciler.Off
		}},
		{"WithRetry", []statedbcompat.Option{statedbcompat.WithRetry(time.Second, time.Hour)}, func(c reconciler.Config[*obj]) bool {
			return c.RetryBackoffMin == time.Second && c.RetryBackoffMax == time.Hour
		}},
		{"WithRoundLimits", []statedbcompat.Option{statedbcompat.WithRoundLimits(50, limiter)}, func(c reconciler.Config[*obj]) bool {
			return c.RoundSize == 50 && c.RoundRateLimiter == limiter
		}},
		{"WithRoundLimits nil limiter paces nothing", []statedbcompat.Option{statedbcompat.WithRoundLimits(50, nil)}, func(c reconciler.Config[*obj]) bool {
			return unlimited(c.RoundRateLimiter)
		}},
		{"WithMetrics", []statedbcompat.Option{statedbcompat.WithMetrics(sdbreconciler.NewUnpublishedExpVarMetrics())}, func(c reconciler.Config[*obj]) bool {
			return c.Metrics != nil
		}},
		{"the last option wins", []statedbcompat.Option{statedbcompat.WithoutPruning(), statedbcompat.WithPruning(time.Minute)}, func(c reconciler.Config[*obj]) bool {
			return c.FullReconciliationInterval == time.Minute
		}},
	}
	for _, tc := range cases {
		if c := build(tc.opts...); !tc.check(c) {
			t.Errorf("%s: got %+v", tc.name, c)
		}
	}
}

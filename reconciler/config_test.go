package reconciler_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cilium/statedb"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler"
)

func TestConfigValidation(t *testing.T) {
	db := statedb.New()
	table, err := statedb.NewTable(db, "objs", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	valid := func() reconciler.Config[*testObject] {
		return reconciler.Config[*testObject]{
			Table:           table,
			GetObjectStatus: func(o *testObject) reconciler.Status { return o.Status },
			SetObjectStatus: func(o *testObject, s reconciler.Status) *testObject { o.Status = s; return o },
			CloneObject:     (*testObject).Clone,
			Operations:      &testOps{},
		}
	}
	tests := []struct {
		field  string
		modify func(*reconciler.Config[*testObject])
	}{
		{"Config.Table", func(c *reconciler.Config[*testObject]) { c.Table = nil }},
		{"Config.GetObjectStatus", func(c *reconciler.Config[*testObject]) { c.GetObjectStatus = nil }},
		{"Config.SetObjectStatus", func(c *reconciler.Config[*testObject]) { c.SetObjectStatus = nil }},
		{"Config.CloneObject", func(c *reconciler.Config[*testObject]) { c.CloneObject = nil }},
		{"Config.Operations", func(c *reconciler.Config[*testObject]) { c.Operations = nil }},
		{"Config.RoundSize", func(c *reconciler.Config[*testObject]) { c.RoundSize = -1 }},
		{"Config.Concurrency", func(c *reconciler.Config[*testObject]) { c.Concurrency = -3 }},
		{"Config.OperationTimeout", func(c *reconciler.Config[*testObject]) { c.OperationTimeout = -time.Second }},
		{"Config.RetryBackoffMin", func(c *reconciler.Config[*testObject]) { c.RetryBackoffMin = -time.Second }},
		{"Config.RetryBackoffMax", func(c *reconciler.Config[*testObject]) { c.RetryBackoffMax = -time.Second }},
		{"Config.RetryBackoffMax", func(c *reconciler.Config[*testObject]) {
			c.RetryBackoffMin, c.RetryBackoffMax = time.Second, time.Millisecond
		}},
		{"Config.MaxRetries", func(c *reconciler.Config[*testObject]) { c.MaxRetries = -1 }},
		{"Config.FullReconciliationInterval", func(c *reconciler.Config[*testObject]) { c.FullReconciliationInterval = -2 * time.Second }},
		{"Config.RefreshInterval", func(c *reconciler.Config[*testObject]) { c.RefreshInterval = -time.Minute }},
		{"Config.MaxWait", func(c *reconciler.Config[*testObject]) { c.MaxWait = time.Second }},
		{"Config.MaxWait", func(c *reconciler.Config[*testObject]) {
			c.Priority, c.MaxWait = func(*testObject) int { return 0 }, -time.Second
		}},
		{"Config.TargetConcurrency", func(c *reconciler.Config[*testObject]) { c.TargetConcurrency = 2 }},
		{"Config.TargetConcurrency", func(c *reconciler.Config[*testObject]) {
			c.TargetKey, c.TargetConcurrency = func(*testObject) string { return "" }, -1
		}},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			cfg := valid()
			tt.modify(&cfg)
			_, err := reconciler.New(cfg, reconciler.Params{})
			if !errors.Is(err, reconciler.ErrInvalidConfig) {
				t.Fatalf("New: got %v, want an error wrapping ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.field+" ") {
				t.Fatalf("New: error %q does not name %s", err, tt.field)
			}
		})
	}

	t.Run("Off is accepted", func(t *testing.T) {
		cfg := valid()
		cfg.FullReconciliationInterval, cfg.RefreshInterval = reconciler.Off, reconciler.Off
		_, err := reconciler.New(cfg, reconciler.Params{})
		// The config is fine; what is missing are the hive's parameters.
		if err == nil || !strings.Contains(err.Error(), "Params.DB") {
			t.Fatalf("New: got %v, want the missing Params.DB", err)
		}
	})

	t.Run("a lone RetryBackoffMax below the default minimum", func(t *testing.T) {
		cfg := valid()
		cfg.RetryBackoffMax = 10 * time.Millisecond
		_, err := reconciler.New(cfg, reconciler.Params{})
		if err == nil || !strings.Contains(err.Error(), "Params.DB") {
			t.Fatalf("New: got %v, want the defaulted minimum to follow the maximum", err)
		}
	})
}

// TestConfigValidationShape: exactly one shape of operations, and nothing
// that only the other shape uses; the error names the field.
func TestConfigValidationShape(t *testing.T) {
	db := statedb.New()
	table, err := statedb.NewTable(db, "objs", idIndex)
	if err != nil {
		t.Fatal(err)
	}
	whole := func() reconciler.Config[*testObject] {
		return reconciler.Config[*testObject]{
			Table:           table,
			GetObjectStatus: func(o *testObject) reconciler.Status { return o.Status },
			SetObjectStatus: func(o *testObject, s reconciler.Status) *testObject { o.Status = s; return o },
			CloneObject:     (*testObject).Clone,
			SyncOperations:  &testSyncOps{},
		}
	}
	type cfg = reconciler.Config[*testObject]
	tests := []struct {
		field  string
		modify func(*cfg)
	}{
		{"Config.Operations", func(c *cfg) { c.SyncOperations = nil }},
		{"Config.SyncOperations", func(c *cfg) { c.Operations = &testOps{} }},
		{"Config.BatchOperations", func(c *cfg) { c.BatchOperations = &testOps{} }},
		{"Config.Concurrency", func(c *cfg) { c.Concurrency = 4 }},
		{"Config.RoundRateLimiter", func(c *cfg) { c.RoundRateLimiter = rate.NewLimiter(1, 1) }},
		{"Config.RefreshInterval", func(c *cfg) { c.RefreshInterval = time.Minute }},
		{"Config.RefreshRateLimiter", func(c *cfg) { c.RefreshRateLimiter = rate.NewLimiter(1, 1) }},
		{"Config.SyncDebounce", func(c *cfg) { c.SyncDebounce = reconciler.Trailing(-time.Second, time.Second) }},
		{"Config.SyncDebounce", func(c *cfg) { c.SyncDebounce = reconciler.Debounce{Quiet: time.Second, Refractory: time.Second} }},
		{"Config.SyncDebounce.MaxWait", func(c *cfg) { c.SyncDebounce = reconciler.Trailing(time.Second, time.Millisecond) }},
		{"Config.Priority", func(c *cfg) { c.Priority = func(*testObject) int { return 1 } }},
		{"Config.FairnessKey", func(c *cfg) { c.FairnessKey = func(*testObject) string { return "" } }},
		{"Config.TargetKey", func(c *cfg) { c.TargetKey = func(*testObject) string { return "" } }},
		{"Config.SyncDebounce", func(c *cfg) {
			c.SyncOperations, c.Operations = nil, &testOps{}
			c.SyncDebounce = reconciler.LeadingEdge(time.Second)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			c := whole()
			tt.modify(&c)
			_, err := reconciler.New(c, reconciler.Params{})
			if !errors.Is(err, reconciler.ErrInvalidConfig) {
				t.Fatalf("New: got %v, want an error wrapping ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("New: error %q does not name %s", err, tt.field)
			}
		})
	}

	t.Run("a valid whole-set Config", func(t *testing.T) {
		for _, d := range []reconciler.Debounce{{}, reconciler.LeadingEdge(time.Second), reconciler.Trailing(time.Millisecond, time.Second), {Quiet: time.Second}} {
			c := whole()
			c.SyncDebounce, c.RefreshInterval, c.RoundSize = d, reconciler.Off, 10
			_, err := reconciler.New(c, reconciler.Params{})
			if err == nil || !strings.Contains(err.Error(), "Params.DB") {
				t.Fatalf("New with %+v: got %v, want the missing Params.DB", d, err)
			}
		}
	})
}

package reconciler

import (
	"fmt"

	"github.com/cilium/statedb"

	"golang.org/x/time/rate"
)

// A Config's defaults and checks: withDefaults fills in the zero fields
// (the numbers are documented at their constants in config.go), and the
// checks refuse what cannot work, each error naming the field as it is
// spelled.

// withDefaults returns cfg with every zero tuning field set to its default.
// Limiters are created here, so no two reconcilers share one.
func (cfg Config[Obj]) withDefaults() Config[Obj] {
	if cfg.RoundSize == 0 {
		cfg.RoundSize = DefaultRoundSize
	}
	cfg.SyncDebounce = cfg.SyncDebounce.withDefaults()
	if cfg.RoundRateLimiter == nil {
		cfg.RoundRateLimiter = rate.NewLimiter(DefaultRoundRate, 1)
	}
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.RetryBackoffMin == 0 {
		cfg.RetryBackoffMin = DefaultRetryBackoffMin
		if cfg.RetryBackoffMax > 0 {
			cfg.RetryBackoffMin = min(cfg.RetryBackoffMin, cfg.RetryBackoffMax)
		}
	}
	if cfg.RetryBackoffMax == 0 {
		cfg.RetryBackoffMax = max(DefaultRetryBackoffMax, cfg.RetryBackoffMin)
	}
	if cfg.FullReconciliationInterval == 0 {
		cfg.FullReconciliationInterval = DefaultFullReconciliationInterval
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.RefreshRateLimiter == nil {
		cfg.RefreshRateLimiter = rate.NewLimiter(DefaultRefreshRate, DefaultRefreshRate)
	}
	if cfg.OperationTimeout == Off {
		cfg.OperationTimeout = 0
	}
	if cfg.InitialPruneDelay == 0 {
		cfg.InitialPruneDelay = DefaultInitialPruneDelay
	}
	if cfg.ordered() && cfg.MaxWait == 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.TargetKey != nil && cfg.TargetConcurrency == 0 {
		cfg.TargetConcurrency = 1
	}
	return cfg
}

// validName reports whether name is usable as Config.Name.
func validName(name string) bool {
	if len(name) > 64 {
		return false
	}
	for _, c := range name {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

// validateShape checks, before the defaults are filled in, that exactly one
// shape of operations is given and nothing that only the other shape uses.
func (cfg Config[Obj]) validateShape() error {
	bad := func(msg string) error { return fmt.Errorf("%w: %s", ErrInvalidConfig, msg) }
	switch {
	case cfg.Operations == nil && cfg.SyncOperations == nil:
		return bad("Config.Operations (per object) or Config.SyncOperations (whole set) is required")
	case cfg.Operations != nil && cfg.SyncOperations != nil:
		return bad("Config.Operations and Config.SyncOperations are exclusive: set one")
	case cfg.SyncOperations == nil:
		if cfg.SyncDebounce != (Debounce{}) {
			return bad("Config.SyncDebounce applies only with Config.SyncOperations")
		}
		if cfg.Ownership != nil && cfg.BatchOperations != nil {
			return bad("Config.Ownership cannot be used with Config.BatchOperations yet: a batch runs under one context, a key's fencing token is its own")
		}
		return cfg.validateOrder(bad)
	case cfg.BatchOperations != nil:
		return bad("Config.BatchOperations cannot be used with Config.SyncOperations")
	case cfg.Requires != nil:
		return bad("Config.Requires does not apply with Config.SyncOperations: one Sync takes the whole set at once")
	case cfg.ordered() || cfg.MaxWait != 0 || cfg.TargetConcurrency != 0:
		return bad("Config.Priority, Config.FairnessKey, Config.TargetKey, Config.MaxWait and Config.TargetConcurrency " +
			"do not apply with Config.SyncOperations: one Sync takes the whole set at once")
	case cfg.Concurrency > 1:
		return bad("Config.Concurrency does not apply with Config.SyncOperations: one Sync runs at a time")
	case cfg.RoundRateLimiter != nil:
		return bad("Config.RoundRateLimiter does not apply with Config.SyncOperations: use Config.SyncDebounce")
	case (cfg.RefreshInterval != 0 && cfg.RefreshInterval != Off) || cfg.RefreshRateLimiter != nil:
		return bad("Config.RefreshInterval and Config.RefreshRateLimiter do not apply with Config.SyncOperations: every Sync repairs drift")
	}
	return cfg.SyncDebounce.withDefaults().validate()
}

// validate checks a Config that has been through withDefaults.
func (cfg Config[Obj]) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
	}
	switch {
	case cfg.Table == nil:
		return bad("Config.Table is required")
	case cfg.GetObjectStatus == nil:
		return bad("Config.GetObjectStatus is required")
	case cfg.SetObjectStatus == nil:
		return bad("Config.SetObjectStatus is required")
	case cfg.CloneObject == nil:
		return bad("Config.CloneObject is required")
	case cfg.RoundSize < 0 || cfg.RoundSize > MaxRoundSize:
		return bad("Config.RoundSize must be between 0 and %d (MaxRoundSize: one round's writes hold the table's lock), got %d",
			MaxRoundSize, cfg.RoundSize)
	case cfg.Concurrency < 0 || cfg.Concurrency > MaxConcurrency:
		return bad("Config.Concurrency must be between 0 and %d (MaxConcurrency: each is a goroutine and an operation in flight), got %d",
			MaxConcurrency, cfg.Concurrency)
	case cfg.OperationTimeout < 0 && cfg.OperationTimeout != Off:
		return bad("Config.OperationTimeout must be positive or Off, got %s", cfg.OperationTimeout)
	case !validName(cfg.Name):
		return bad("Config.Name %q may hold only letters, digits, '-', '_' and '.', at most 64 of them", cfg.Name)
	case cfg.MaxRetries < 0:
		return bad("Config.MaxRetries must not be negative, got %d", cfg.MaxRetries)
	}
	if err := validObservers(cfg.Observers); err != nil {
		return err
	}
	if err := cfg.validateRequires(); err != nil {
		return err
	}
	return cfg.validateDurations(bad)
}

// validateDurations checks the durations of a Config that has been through
// withDefaults.
func (cfg Config[Obj]) validateDurations(bad func(format string, args ...any) error) error {
	switch {
	case cfg.RetryBackoffMin < 0:
		return bad("Config.RetryBackoffMin must not be negative, got %s", cfg.RetryBackoffMin)
	case cfg.RetryBackoffMax < 0:
		return bad("Config.RetryBackoffMax must not be negative, got %s", cfg.RetryBackoffMax)
	case cfg.RetryBackoffMax < cfg.RetryBackoffMin:
		return bad("Config.RetryBackoffMax (%s) must not be below Config.RetryBackoffMin (%s)",
			cfg.RetryBackoffMax, cfg.RetryBackoffMin)
	case cfg.FullReconciliationInterval < 0 && cfg.FullReconciliationInterval != Off:
		return bad("Config.FullReconciliationInterval must be positive or Off, got %s", cfg.FullReconciliationInterval)
	case cfg.InitialPruneDelay < 0 && cfg.InitialPruneDelay != Off:
		return bad("Config.InitialPruneDelay must be positive or Off, got %s", cfg.InitialPruneDelay)
	case cfg.RefreshInterval < 0 && cfg.RefreshInterval != Off:
		return bad("Config.RefreshInterval must be positive or Off, got %s", cfg.RefreshInterval)
	}
	return nil
}

// validateRequires checks Config.Requires: each made by Requires, on a
// table of its own that can be looked up by key.
func (cfg Config[Obj]) validateRequires() error {
	for i, q := range cfg.Requires {
		if q == nil {
			return fmt.Errorf("%w: Config.Requires[%d] is nil", ErrInvalidConfig, i)
		}
		n := q.needOf()
		if err := n.check(); err != nil {
			return err
		}
		if n.name() == cfg.Table.Name() {
			return fmt.Errorf("%w: Config.Requires[%d] names the reconciler's own table %s: use Config.DependsOn",
				ErrInvalidConfig, i, n.name())
		}
	}
	return nil
}

// requiresIn checks that Config.Requires' tables are db's.
func (cfg Config[Obj]) requiresIn(db *statedb.DB) error {
	for _, q := range cfg.Requires {
		if err := q.needOf().inDB(db); err != nil {
			return err
		}
	}
	return nil
}

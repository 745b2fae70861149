package leader

import (
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of Config's tuning fields.
const (
	// DefaultTTL is the lease TTL. A crashed leader is replaced within about
	// TTL (plus RetryInterval at worst); a shorter TTL fails over faster and
	// costs proportionally more keepalives (one every TTL/3).
	DefaultTTL = 5 * time.Second

	// DefaultRetryInterval is the pause after a failed session or campaign
	// before the next attempt. A standby waiting in Campaign does not
	// wait it: it is woken by the leader's key being deleted.
	DefaultRetryInterval = time.Second

	// DefaultResignTimeout bounds each of the two steps of a clean stop:
	// the wait for operations in flight, then the resign. If etcd cannot be
	// reached in that time the lease expires on its own.
	DefaultResignTimeout = 2 * time.Second
)

// Config configures an Elector.
type Config struct {
	// Client is the etcd client. Required.
	Client *clientv3.Client

	// Prefix is the election's key prefix; every replica of one group of
	// reconcilers uses the same one, for example "/fleet/leader". Required.
	// The election keys are Prefix + "/" + the lease ID in hex.
	Prefix string

	// Name identifies this replica; it is the value of its election key,
	// which Leader reports. Required.
	Name string

	// TTL of the session lease, in whole seconds. Default DefaultTTL.
	TTL time.Duration

	// SafetyMargin: the leader steps down when no keepalive has succeeded
	// for TTL - SafetyMargin, before the lease can have expired at the
	// server. It must cover the round trip to etcd and the clock rate error
	// over a TTL. Default TTL/5, at least 200ms; it must be less than TTL/2.
	SafetyMargin time.Duration

	// RetryInterval is the pause after a failed session or campaign.
	// Default DefaultRetryInterval.
	RetryInterval time.Duration

	// ResignTimeout bounds, at a clean stop, the wait for operations in
	// flight (then they are cancelled) and then the resign. Default
	// DefaultResignTimeout.
	ResignTimeout time.Duration
}

func (cfg Config) withDefaults() Config {
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.SafetyMargin == 0 {
		cfg.SafetyMargin = max(cfg.TTL/5, 200*time.Millisecond)
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.ResignTimeout == 0 {
		cfg.ResignTimeout = DefaultResignTimeout
	}
	return cfg
}

func (cfg Config) validate() error {
	switch {
	case cfg.Client == nil:
		return fmt.Errorf("%w: Client is nil", ErrInvalidConfig)
	case cfg.Prefix == "" || strings.HasSuffix(cfg.Prefix, "/"):
		return fmt.Errorf("%w: Prefix %q must be non-empty and not end in /", ErrInvalidConfig, cfg.Prefix)
	case cfg.Name == "":
		return fmt.Errorf("%w: Name is empty", ErrInvalidConfig)
	case cfg.TTL < time.Second || cfg.TTL%time.Second != 0:
		return fmt.Errorf("%w: TTL %v must be a whole number of seconds, at least 1s", ErrInvalidConfig, cfg.TTL)
	case cfg.SafetyMargin < 0 || cfg.SafetyMargin >= cfg.TTL/2:
		return fmt.Errorf("%w: SafetyMargin %v must be in [0, TTL/2)", ErrInvalidConfig, cfg.SafetyMargin)
	case cfg.RetryInterval < 0:
		return fmt.Errorf("%w: RetryInterval %v is negative", ErrInvalidConfig, cfg.RetryInterval)
	case cfg.ResignTimeout < 0:
		return fmt.Errorf("%w: ResignTimeout %v is negative", ErrInvalidConfig, cfg.ResignTimeout)
	}
	return nil
}

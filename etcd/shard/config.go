package shard

import (
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Defaults of Config's tuning fields.
const (
	// DefaultSlots is the number of slots keys are spread over. It bounds
	// the useful number of replicas (each needs slots to own) and sets the
	// granularity of balance: with 256 slots and 8 replicas, each owns 32
	// ± 6 or so. It cannot be changed without stopping every replica.
	DefaultSlots = 256

	// DefaultTTL is the lease TTL: a crashed replica's slots move after
	// about TTL.
	DefaultTTL = 5 * time.Second

	// DefaultRetryInterval is the pause after a failed session, watch or
	// claim before the next attempt.
	DefaultRetryInterval = time.Second

	// DefaultDrainTimeout bounds how long a slot being handed over waits
	// for its operations in flight; then they are cancelled and the slot is
	// released (a fenced target refuses what they still write). Keep it at
	// least the reconcilers' OperationTimeout.
	DefaultDrainTimeout = 30 * time.Second

	// DefaultSummaryInterval is how often at most a replica republishes
	// its summary when only its counts changed (a change of its slots is
	// published at once): N replicas write at most N/10 times a second.
	DefaultSummaryInterval = 10 * time.Second

	// DefaultReleaseTimeout bounds the lease revocation at a clean stop.
	DefaultReleaseTimeout = 2 * time.Second
)

// Config configures a Manager.
type Config struct {
	// Client is the etcd client. Required.
	Client *clientv3.Client

	// Prefix is the group's key prefix; every replica of the group uses the
	// same one, for example "/fleet/shards". Required. Members register at
	// Prefix/members/<Name>, claims live at Prefix/slots/<slot>, the slot
	// count at Prefix/slots and summaries at Prefix/summary/<Name>.
	Prefix string

	// Name identifies this replica among the group's members; it must be
	// unique and stable across restarts (a host name). Required.
	Name string

	// Slots is the number of slots. Every replica of the group must use the
	// same value; Run fails with ErrSlotsMismatch otherwise. Default
	// DefaultSlots.
	Slots int

	// TTL of the replica's lease, in whole seconds. Default DefaultTTL.
	TTL time.Duration

	// SafetyMargin: every slot is dropped when no keepalive has succeeded
	// for TTL - SafetyMargin. Default TTL/5, at least 200ms; less than TTL/2.
	SafetyMargin time.Duration

	// RetryInterval is the pause after a failure. Default DefaultRetryInterval.
	RetryInterval time.Duration

	// DrainTimeout bounds the wait for a slot's operations at handover.
	// Default DefaultDrainTimeout.
	DrainTimeout time.Duration

	// ReleaseTimeout bounds the lease revocation at a clean stop. Default
	// DefaultReleaseTimeout.
	ReleaseTimeout time.Duration

	// Report, if set, is called for the replica's Summary: the counts of
	// the objects of the slots this replica owns (Owned, as of the call),
	// and the desired revision they cover (Report.Covers; the view is
	// never Done without it). It must not block, and is called at every
	// turn of the manager's loop.
	Report func() Report

	// SummaryInterval: a summary whose counts changed is republished at
	// most this often. Default DefaultSummaryInterval.
	SummaryInterval time.Duration
}

func (cfg Config) withDefaults() Config {
	if cfg.Slots == 0 {
		cfg.Slots = DefaultSlots
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.SafetyMargin == 0 {
		cfg.SafetyMargin = max(cfg.TTL/5, 200*time.Millisecond)
	}
	if cfg.RetryInterval == 0 {
		cfg.RetryInterval = DefaultRetryInterval
	}
	if cfg.DrainTimeout == 0 {
		cfg.DrainTimeout = DefaultDrainTimeout
	}
	if cfg.ReleaseTimeout == 0 {
		cfg.ReleaseTimeout = DefaultReleaseTimeout
	}
	if cfg.SummaryInterval == 0 {
		cfg.SummaryInterval = DefaultSummaryInterval
	}
	return cfg
}

func (cfg Config) validate() error {
	switch {
	case cfg.Client == nil:
		return fmt.Errorf("%w: Client is nil", ErrInvalidConfig)
	case cfg.Prefix == "" || strings.HasSuffix(cfg.Prefix, "/"):
		return fmt.Errorf("%w: Prefix %q must be non-empty and not end in /", ErrInvalidConfig, cfg.Prefix)
	case cfg.Name == "" || strings.Contains(cfg.Name, "/"):
		return fmt.Errorf("%w: Name %q must be non-empty and contain no /", ErrInvalidConfig, cfg.Name)
	case cfg.Slots < 1 || cfg.Slots > 1<<16:
		return fmt.Errorf("%w: Slots %d must be in [1, 65536]", ErrInvalidConfig, cfg.Slots)
	case cfg.TTL < time.Second || cfg.TTL%time.Second != 0:
		return fmt.Errorf("%w: TTL %v must be a whole number of seconds, at least 1s", ErrInvalidConfig, cfg.TTL)
	case cfg.SafetyMargin < 0 || cfg.SafetyMargin >= cfg.TTL/2:
		return fmt.Errorf("%w: SafetyMargin %v must be in [0, TTL/2)", ErrInvalidConfig, cfg.SafetyMargin)
	case cfg.RetryInterval < 0:
		return fmt.Errorf("%w: RetryInterval %v is negative", ErrInvalidConfig, cfg.RetryInterval)
	case cfg.DrainTimeout <= 0:
		return fmt.Errorf("%w: DrainTimeout %v must be positive", ErrInvalidConfig, cfg.DrainTimeout)
	case cfg.ReleaseTimeout < 0:
		return fmt.Errorf("%w: ReleaseTimeout %v is negative", ErrInvalidConfig, cfg.ReleaseTimeout)
	case cfg.SummaryInterval <= 0:
		return fmt.Errorf("%w: SummaryInterval %v must be positive", ErrInvalidConfig, cfg.SummaryInterval)
	}
	return nil
}

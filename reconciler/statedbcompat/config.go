package statedbcompat

import (
	"time"

	"github.com/cilium/statedb"
	sdbreconciler "github.com/cilium/statedb/reconciler"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler"
)

// Option is one of the incumbent's options (statedb reconciler's
// WithName, WithPruning, ...), with the same name, arguments and meaning.
// statedb's own Option values cannot be read from outside its package, so
// these stand in for them: change the import, keep the calls.
type Option func(*options)

// options are the incumbent's settings, with its defaults.
type options struct {
	name            string
	metrics         sdbreconciler.Metrics
	pruneInterval   time.Duration
	refreshInterval time.Duration
	refreshLimiter  *rate.Limiter
	retryMin        time.Duration
	retryMax        time.Duration
	roundSize       int
	roundLimiter    *rate.Limiter
}

// defaults are the incumbent's (statedb v0.9.4's reconciler/config.go):
// prune hourly, refresh every 30 minutes at 100 objects a second (burst 1;
// its doc says refreshing is off by default, its code does not), retry
// from 100ms to a minute, rounds of 1000 at most 1000 a second (burst 1).
func defaults() options {
	return options{
		pruneInterval:   time.Hour,
		refreshInterval: 30 * time.Minute,
		refreshLimiter:  rate.NewLimiter(100, 1),
		retryMin:        100 * time.Millisecond,
		retryMax:        time.Minute,
		roundSize:       1000,
		roundLimiter:    rate.NewLimiter(1000, 1),
	}
}

// WithName is the incumbent's WithName: the reconciler's name in metrics
// and in its jobs' names (Config.Name).
func WithName(name string) Option { return func(o *options) { o.name = name } }

// WithMetrics is the incumbent's WithMetrics: m receives what the
// reconciler reports, through Metrics.
func WithMetrics(m sdbreconciler.Metrics) Option { return func(o *options) { o.metrics = m } }

// WithPruning is the incumbent's WithPruning: Prune runs once the table is
// initialized and then every interval (Config.FullReconciliationInterval).
// Zero turns periodic pruning off, as WithoutPruning does.
func WithPruning(interval time.Duration) Option {
	return func(o *options) { o.pruneInterval = interval }
}

// WithoutPruning is the incumbent's WithoutPruning: no periodic Prune.
// Refresh goes on (converge refreshes on a timer of its own, as the
// incumbent does); TriggerFullReconciliation still prunes.
func WithoutPruning() Option { return func(o *options) { o.pruneInterval = 0 } }

// WithRefreshing is the incumbent's WithRefreshing: an object Done for
// interval is marked Refreshing so that Update runs again, at most as fast
// as limiter allows. A nil limiter means no limit, as in the incumbent
// (converge's own Config reads nil as its default of 100 a second). Zero
// turns refreshing off.
func WithRefreshing(interval time.Duration, limiter *rate.Limiter) Option {
	return func(o *options) { o.refreshInterval, o.refreshLimiter = interval, limiter }
}

// WithRetry is the incumbent's WithRetry: failed operations are retried
// with exponential backoff from minBackoff to maxBackoff.
func WithRetry(minBackoff, maxBackoff time.Duration) Option {
	return func(o *options) { o.retryMin, o.retryMax = minBackoff, maxBackoff }
}

// WithRoundLimits is the incumbent's WithRoundLimits: at most numObjects
// per round, rounds paced by limiter. A nil limiter paces nothing (the
// incumbent would dereference it).
func WithRoundLimits(numObjects int, limiter *rate.Limiter) Option {
	return func(o *options) { o.roundSize, o.roundLimiter = numObjects, limiter }
}

// Config returns the converge Config that does what the incumbent's
// Register(params, table, clone, setStatus, getStatus, ops, batchOps,
// options...) does, for reconciler.New or reconciler.Register. The status
// accessors are converge's: for objects that keep a statedb Status or
// StatusSet, convert in them (StatusFromStatedb, GetFromSet, ...). The incumbent's zero durations (off) become
// reconciler.Off, and its nil refresh limiter an unlimited one. Whatever
// converge adds (Concurrency, OperationTimeout, MaxRetries, ...) is left at
// converge's default: set it on the result.
func Config[Obj comparable](
	table statedb.RWTable[Obj],
	clone func(Obj) Obj,
	setStatus func(Obj, reconciler.Status) Obj,
	getStatus func(Obj) reconciler.Status,
	ops reconciler.Operations[Obj],
	batchOps reconciler.BatchOperations[Obj],
	opts ...Option,
) reconciler.Config[Obj] {
	o := defaults()
	for _, opt := range opts {
		opt(&o)
	}
	cfg := reconciler.Config[Obj]{
		Table:                      table,
		CloneObject:                clone,
		SetObjectStatus:            setStatus,
		GetObjectStatus:            getStatus,
		Operations:                 ops,
		BatchOperations:            batchOps,
		Name:                       o.name,
		RoundSize:                  o.roundSize,
		RoundRateLimiter:           orUnlimited(o.roundLimiter),
		RetryBackoffMin:            o.retryMin,
		RetryBackoffMax:            o.retryMax,
		FullReconciliationInterval: orOff(o.pruneInterval),
		RefreshInterval:            orOff(o.refreshInterval),
		RefreshRateLimiter:         orUnlimited(o.refreshLimiter),
	}
	if o.metrics != nil {
		cfg.Metrics = Metrics(o.metrics)
	}
	return cfg
}

// orOff turns the incumbent's "zero is off" into converge's Off.
func orOff(d time.Duration) time.Duration {
	if d == 0 {
		return reconciler.Off
	}
	return d
}

// orUnlimited turns the incumbent's nil limiter into one that never waits.
func orUnlimited(l *rate.Limiter) *rate.Limiter {
	if l == nil {
		return rate.NewLimiter(rate.Inf, 1)
	}
	return l
}

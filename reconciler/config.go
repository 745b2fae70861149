package reconciler

import (
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"golang.org/x/time/rate"
)

// Off, given as an interval, turns that periodic work off. Any other
// negative duration is a configuration error.
const Off time.Duration = -1

// Defaults for the zero value of each tuning field of Config. Each is
// documented on its field too; change both together.
const (
	// 1000 objects per round keeps a round's write transaction short
	// (a few milliseconds) while amortizing its fixed cost.
	DefaultRoundSize = 1000

	// At most 1000 rounds a second, bursts of one: the first change after a
	// quiet period is reconciled at once, and a burst of changes is folded
	// into rounds at least a millisecond apart.
	DefaultRoundRate = 1000

	// One operation at a time, like the incumbent: targets that are not safe
	// for concurrent use keep working unchanged.
	DefaultConcurrency = 1

	// First retry after 100ms, doubling up to a minute: quick recovery from
	// a blip, and a dead target costs one attempt per object per minute.
	DefaultRetryBackoffMin = 100 * time.Millisecond
	DefaultRetryBackoffMax = time.Minute

	// Prune once an hour: drift in the target is repaired within the hour
	// without walking a large table often.
	DefaultFullReconciliationInterval = time.Hour

	// Refresh objects Done for more than 30 minutes, at most 100 a second
	// with bursts of 100, so a refresh never floods the target.
	DefaultRefreshInterval = 30 * time.Minute
	DefaultRefreshRate     = 100

	// Two seconds covers a program that fills its table right after
	// start, and costs a program whose desired set is truly empty no more
	// than that before its first prune.
	DefaultInitialPruneDelay = 2 * time.Second

	// A ready request waits at most 10s (with Priority, FairnessKey or
	// TargetKey) before it is taken ahead of every later one: long against
	// a round, short against anyone waiting for a change.
	DefaultMaxWait = 10 * time.Second
)

// Upper bounds of the sizing fields. Beyond them a reconciler does not get
// faster, only larger: New refuses them rather than let a typo cost
// gigabytes or stall every writer of the table.
const (
	// A round's status writes are one write transaction, which holds the
	// table's lock: a million of them keep every other writer waiting for
	// about a second.
	MaxRoundSize = 1 << 20

	// Each unit of concurrency may be a goroutine with its own stack and
	// an operation in flight against the target; no target we know of
	// serves more than a few thousand at once from one client.
	MaxConcurrency = 4096
)

// Config describes one reconciler. Table, GetObjectStatus, SetObjectStatus,
// CloneObject and exactly one of Operations or SyncOperations are
// required; for every other field the zero value means the documented
// default. New rejects a bad Config with an error that wraps
// ErrInvalidConfig and names the field.
type Config[Obj any] struct {
	// Table holds the desired objects. Required.
	Table statedb.RWTable[Obj]

	// GetObjectStatus returns this reconciler's status of an object.
	// Required. With several reconcilers per object, return
	// obj.Statuses.Get(name) of a StatusSet.
	GetObjectStatus func(Obj) Status

	// SetObjectStatus returns obj with its status set to s. Required. It is
	// always given a clone made by CloneObject, so it may modify obj in
	// place and return it.
	SetObjectStatus func(obj Obj, s Status) Obj

	// CloneObject returns a shallow copy of obj. Required. Objects in a
	// statedb table are immutable; the reconciler clones before handing an
	// object to Update and before setting its status. Returning obj itself
	// (for pointer types) corrupts the table's snapshots.
	CloneObject func(Obj) Obj

	// Operations make a per-object target match the table, one object (or
	// with BatchOperations one round) at a time. Exactly one of Operations
	// and SyncOperations is required.
	Operations Operations[Obj]

	// BatchOperations, if set, are used instead of Operations.Update and
	// Operations.Delete: one call per round for updates, one for deletes.
	// Not with SyncOperations.
	BatchOperations BatchOperations[Obj]

	// SyncOperations make a whole-set target match the table: each Sync is
	// given the entire desired set from one snapshot (see SyncOperations).
	// With them, Concurrency, RoundRateLimiter, RefreshInterval and
	// RefreshRateLimiter do not apply (one Sync runs at a time, SyncDebounce
	// paces them, and every Sync repairs drift) and must be left zero;
	// RoundSize bounds the status writes per write transaction. Exactly
	// one of Operations and SyncOperations is required.
	SyncOperations SyncOperations[Obj]

	// SyncDebounce says when a Sync runs after changes. Default: a trailing
	// quiet period of 100ms, at most 1s in all (see Debounce). Only with
	// SyncOperations.
	SyncDebounce Debounce

	// Name tells reconcilers of one module apart in metrics, job names,
	// health and script commands. Optional when a module has one
	// reconciler. At most 64 letters, digits, '-', '_' and '.': '/'
	// separates modules in the names health and the commands print.
	Name string

	// RoundSize is the most objects one round picks up (changes plus due
	// retries), and so the most objects waiting for or in operations at
	// once, and the most status writes in one write transaction. While
	// the statuses of up to two earlier rounds are being written, the
	// next round already runs. Default 1000 (DefaultRoundSize).
	RoundSize int

	// RoundRateLimiter spaces rounds out so bursts of changes fold into
	// fewer rounds. Default: 1000 rounds a second, burst 1
	// (DefaultRoundRate). A slower limiter (say rate.Every(100ms), burst 1)
	// debounces: the first change goes at once, later ones wait for the
	// next round. Only rounds that pick up work take a token: reading the
	// reconciler's own status writes back never delays a user's change,
	// and is not itself delayed.
	// With Priority, FairnessKey or TargetKey, changes are read unpaced
	// (they only fill the ordered queue) and the limiter is not used.
	RoundRateLimiter *rate.Limiter

	// Concurrency is the most Update/Delete operations (or batches) in
	// flight at once. Two operations for the same primary key never run at
	// once. Default 1 (DefaultConcurrency). Operations run on worker
	// goroutines, at most Concurrency of them, never on the reconciler's
	// own loop, which goes on reading changes and reporting meanwhile.
	// Without OperationTimeout, an operation that never returns keeps its
	// worker: Concurrency such operations stop every other one from
	// starting (Status and health show them in flight, the oldest waiting
	// growing); set OperationTimeout to be protected from that.
	Concurrency int

	// OperationTimeout bounds each operation through its context. At its
	// deadline the attempt counts as failed with an error wrapping
	// ErrTimeout (in the status, health, Status() and the metrics) and is
	// retried, whether or not the call has returned; a result that comes
	// later is discarded. An operation that ignores its context and runs
	// on past its deadline hands its worker's place to a new worker (at
	// most Concurrency such at once), so the other objects keep flowing.
	// What such an operation can still do: it keeps its key (no other
	// operation for that object starts until it returns), and it may
	// still change the target. Stopping the hive waits for an operation
	// in flight at most OperationTimeout plus 100ms after the stop began
	// (and never past a little before the stop deadline, with or without
	// it), then gives up on it, logging which, and returns: its goroutine
	// ends when it returns. A Prune past its deadline is abandoned:
	// incremental rounds go on beside it, and the full reconciliation is
	// retried after it returns. Default, and Off: no timeout.
	OperationTimeout time.Duration

	// RetryBackoffMin and RetryBackoffMax bound the exponential backoff of
	// retries of failed objects: the n-th consecutive failure waits about
	// min(RetryBackoffMin * 2^(n-1), RetryBackoffMax), with jitter.
	// Defaults 100ms and 1m.
	RetryBackoffMin time.Duration
	RetryBackoffMax time.Duration

	// MaxRetries, if above zero, is the number of consecutive failures after
	// which an object is given up on (like a Permanent error) until it
	// changes or is refreshed. Default 0: retry forever.
	MaxRetries int

	// FullReconciliationInterval is how often a full reconciliation (Prune
	// with every desired object) runs; the first runs once the table is
	// initialized. Off turns automatic pruning off (statedb's
	// WithoutPruning); TriggerFullReconciliation still prunes, and refresh
	// goes on. Default 1h.
	FullReconciliationInterval time.Duration

	// RefreshInterval is how long an object stays Done (or given up on in
	// Error: Permanent, MaxRetries) before it is marked Refreshing, so that
	// Update repairs any drift or tries a given-up object again. Refresh
	// runs on a timer of its own, whatever FullReconciliationInterval is:
	// an object is refreshed RefreshInterval after its last status write,
	// give or take one round and RefreshRateLimiter's pace. An object
	// refreshed is Done again at once, so a tiny interval refreshes every
	// object over and over. Off turns refreshing off. Default 30m.
	RefreshInterval time.Duration

	// InitialPruneDelay is how long the first Prune (or Sync) waits for a
	// first write to a table that had no pending initializer when the
	// reconciler started: such a table counts as initialized at once,
	// though its desired set may still be to come, and pruning against
	// it would remove real state. Register an initializer instead (see
	// the package doc); Off prunes at once. Default 2s
	// (DefaultInitialPruneDelay).
	InitialPruneDelay time.Duration

	// RefreshRateLimiter limits how fast objects are marked Refreshing.
	// Default: 100 a second, burst 100 (DefaultRefreshRate).
	RefreshRateLimiter *rate.Limiter

	// Metrics receives this reconciler's metrics. Default: the module's
	// default Metrics (see package metrics), else none.
	Metrics Metrics

	// Ownership, if set, limits the reconciler to the keys this replica
	// owns (see Ownership). Not with BatchOperations. Default: every key.
	Ownership Ownership

	// StartSuspended constructs the reconciler suspended: nothing is
	// reconciled until Resume (for example once leadership is gained).
	StartSuspended bool

	// Priority orders the ready requests, higher first (nil: all equal);
	// among equals, new changes go before retries before refreshes, and a
	// retry, once due, competes by its priority. With Priority, FairnessKey
	// or TargetKey every change is read at once (not only a round's
	// worth), a change the order takes first is read ahead of a backlog
	// written before it, and the workers are handed requests in that
	// order. Not with SyncOperations.
	Priority func(obj Obj) int
	// MaxWait bounds how long a ready request is passed over: once it has
	// waited MaxWait, no request that became ready after it is taken before
	// it (first come, first served from then on), so a low priority or a
	// busy fairness key delays a key and never starves it. Default 10s
	// (DefaultMaxWait); only with Priority, FairnessKey or TargetKey.
	MaxWait time.Duration
	// FairnessKey names what an object's work is shared across (a tenant,
	// a namespace, a remote endpoint): within a priority, requests are
	// taken round-robin across fairness keys, so a quiet key's request
	// waits for one request of each busy key, not for their backlogs.
	FairnessKey func(obj Obj) string
	// TargetKey names the target an object's operations go to (a remote
	// endpoint, a BPF map): at most TargetConcurrency operations of one
	// target run at once, so a hung target holds at most that many
	// workers; its requests wait, taking no room in a round, while the
	// others run. Not with SyncOperations.
	TargetKey func(obj Obj) string
	// TargetConcurrency is the most operations of one TargetKey in flight.
	// Default 1; only with TargetKey.
	TargetConcurrency int

	// DependsOn names the objects of the same table that an object needs
	// before its Update may start (a route its device, a file its
	// directory), by their primary keys: the primary index's key bytes,
	// index.String(dir) for a string key, or the index's FromKey for
	// another type (the key type varies by table; these bytes are what
	// every statedb index agrees on, and what the reconciler keys its
	// requests by). An Update starts only once every object named is in
	// the table and Done for this reconciler; until then the key is
	// Blocked: no attempt, no retry, no failure, and it is released in the
	// step that commits its last dependency's Done. A Delete waits until
	// every object that depended on its object, as last reconciled, is
	// deleted from the target: leaves first. A key on a cycle is never
	// attempted: it is given up on with an error wrapping
	// ErrDependencyCycle, until a key of the cycle changes. Prune (and a
	// Sync) get the desired objects dependencies first. A dependency only
	// gates: a change of it does not run its dependents again. With
	// SyncOperations only the order applies. Without it (the zero value)
	// nothing is gated, at no cost. See docs/dependencies.md.
	DependsOn func(obj Obj) []index.Key

	// Requires names rows of other tables that an object needs before its
	// Update may start, made with Requires: a route its device in a
	// devices table that no reconciler of ours writes, present and up.
	// They gate as DependsOn does (Blocked, never a failure; Explain says
	// which row is missing), and a key is released in the step that reads
	// the change that brings its last row: the loop reads each table's
	// changes, woken by its watch channel, not by polling. A row only
	// gates, and a Delete never waits for another table. Per-object
	// Operations only. Without it (nil) nothing is read. See
	// docs/dependencies.md.
	Requires []Requirement[Obj]

	// Observers are told what happens to each request: read, ready,
	// started, finished, committed, failed, given up (see Observer and
	// Event). They are called synchronously and must return at once; a
	// Subscription hands outcomes to a slow reader without blocking,
	// dropping (and counting) what does not fit. A panic in one is
	// recovered and counted. Default: none, which costs nothing.
	Observers []Observer
}

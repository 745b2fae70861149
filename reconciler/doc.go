// Package reconciler makes the outside world match a statedb table.
//
// Desired objects live in a statedb.RWTable and embed a Status (or, for
// several reconcilers over one object, a StatusSet). A Reconciler, built
// with New or Register from a Config, watches the table and calls the
// Operations (Update, Delete, Prune) until the target matches, recording
// each object's outcome in its status. It runs as a job of the hive
// module it is constructed in.
//
// # How a change flows
//
// A writer inserts an object with StatusPending() (or deletes it). The
// reconciler's loop reads the table's changes in revision order, deletes
// included, and picks up at most Config.RoundSize objects per round, paced
// by Config.RoundRateLimiter. Their operations run on a clone of the object,
// up to Config.Concurrency at once and never two for one primary key; the
// results are committed in one write transaction per round, each with a
// compare-and-swap on the revision the operation saw, so a stale result
// never overwrites a newer object. When more changes are waiting, the writes
// go to a committer goroutine and the next round is read and run while they
// wait for and hold the table's write lock. Success marks the object Done;
// failure marks it Error and schedules a retry with jittered exponential
// backoff, unless the error is Permanent, MaxRetries is spent, or the
// operation asked for RetryAfter. Full reconciliation (Prune with every
// desired object, then refresh of objects Done for longer than
// Config.RefreshInterval) runs once the table is initialized, every
// Config.FullReconciliationInterval, and on TriggerFullReconciliation.
//
// # Whole-set targets
//
// A target that takes the entire desired state at once (an nftables
// ruleset, a reloaded config file) is given Config.SyncOperations instead.
// Its changes are debounced (Config.SyncDebounce), and one Sync at a time
// gets every desired object of one snapshot plus the changes since the last
// successful Sync; its result is written into every object that asked for
// work, with the same compare-and-swap, retries, health, metrics and waiting
// as above. The first Sync waits until the table is initialized, and a Sync
// also runs every FullReconciliationInterval to repair drift.
//
// # Guarantees
//
//   - Nothing is lost: every desired object ends Done once the target
//     accepts it, and every deleted object gets a successful Delete (or is
//     removed by the next successful Prune).
//   - No status is written and no operation started after the hive stops;
//     operations in flight see a cancelled context.
//   - An operation that panics, errs or hangs harms only its own object:
//     panics are recovered (ErrPanic), OperationTimeout bounds each call
//     (ErrTimeout), and a worker stuck past its deadline is replaced.
//   - Bad configuration fails New with an error wrapping ErrInvalidConfig
//     that names the field.
//   - Work per round is proportional to what changed, not to the table.
//
// # Observing and testing
//
// Health is reported through the hive's job health; Status returns a
// snapshot; Metrics (see package metrics) receives counters, histograms and
// gauges. Cell adds a registry and the reconciler/status, full, wait,
// suspend and resume script commands. Tests wait with WaitUntilSettled,
// WaitUntilReconciled or WaitForReconciliation (with index.NewStatusIndex),
// never with sleeps.
package reconciler

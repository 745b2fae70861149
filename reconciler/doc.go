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
// A writer inserts an object with StatusPending() (or deletes it); an
// object written with StatusUnset() is in the table but asks nothing (no
// Update, no refresh, no wait; Prune and Sync still get it as desired
// state), and making it Unset withdraws what its key had outstanding. The
// reconciler's loop reads the table's changes in revision order, deletes
// included, and turns each change that asks something of it into a
// request: at most Config.RoundSize outstanding at once, rounds paced by
// Config.RoundRateLimiter. Requests run on up to Config.Concurrency
// workers, on a clone of the object, never two for one primary key; a
// newer change of a key in flight waits for it, and then replaces it. The
// results of a step are committed in one write transaction. A status is
// written only while this reconciler's status in the current object is
// still the one the request read (or last wrote), whatever else changed
// (the data, another reconciler's entry in a StatusSet): otherwise a newer
// request exists, and the change iterator delivers it. Success marks the
// object Done; failure marks it Error and schedules a retry with jittered
// exponential backoff, unless the error is Permanent, MaxRetries is spent,
// or the operation asked for RetryAfter. A retry hands Update the object
// with the status that asked for the work (Pending or Refreshing). Full
// reconciliation (Prune with every desired object) runs once the table is
// initialized, every Config.FullReconciliationInterval, and on
// TriggerFullReconciliation. Refresh runs on a schedule of its own
// (refresh.go): an object Done (or given up on) for Config.RefreshInterval
// is marked Refreshing, so that Update repairs drift in the target,
// whether or not pruning is on.
//
// Register an initializer on the table (Table.RegisterInitializer) and
// mark it done once the desired set is complete: until then nothing is
// pruned. A table on which no initializer was ever registered counts as
// initialized at once; for it, the first prune waits for the first write
// to the table, and a warning names RegisterInitializer.
//
// # Who owns what
//
// One goroutine, the loop, owns all of a reconciler's state: the
// outstanding work (work.go: per key, the revision that asked, the status
// as read and as written, attempts, the next retry or why none, the
// attempt in flight), the retry heaps, the breaker, the full
// reconciliation and the health. Status(), health, the gauges and the
// three waits are all derived from the outstanding work after each step
// and published: Status() reads an atomic pointer, the waits a mutex-held
// value and its channel. With Config.Ownership, ownership is a state of
// that same model, decided in one place (owned.go): a key this replica
// does not own is no request, only a key in the model's unowned set (no
// object copy; a key deleted meanwhile is forgotten, its delete being the
// owner's work). A key gained becomes a request built from the table as
// it is then, counted from the first change read while it was unowned
// (or, when it was lost, from its request's). Refresh, Prune (given only the owned objects, under
// Acquire(ctx, nil)) and the waits read ownership from the model; every
// status write asks Owns inside its write transaction. A write that did
// not land leaves a request that still owes the work unless a newer
// request exists: there is no "superseded, so forget it" for a result
// whose key was given away and gained meanwhile.
//
// Workers own nothing: each is handed a task (the object, its revision,
// an attempt id) and hands back a result value through the executor's
// mutex-held queue (workers.go). An attempt that
// passes OperationTimeout is reported failed by the timer's goroutine
// through the same queue; its own result, when it comes, is discarded.
// While more work waits, a commit's status writes go to the committer
// goroutine (committer.go), which owns nothing but the writes it is handed
// (at most two commits' worth) and hands them back with their outcomes;
// their requests wait, with the loop, in stCommitting, and count as
// outstanding until the loop has landed them. The whole-set loop keeps
// its requests in the same structure, read by the same rule (round.go's
// decide) and written by the same rule (write.go's writeStatus); only the
// executor differs: one Sync at a
// time, on a goroutine of its own that owns nothing but the syncRun it was
// handed (its snapshot and its changes) until it hands it back. A Sync past
// OperationTimeout fails its requests with ErrTimeout at the deadline and
// keeps its place until it returns; its result is then discarded, whether
// the loop reads it before or after the deadline's signal. The round
// timer's short waits go to a timerfd read by a goroutine of its own
// (fineclock_linux.go), which owns nothing but the fd and only signals;
// inside a testing/synctest bubble, where time is fake, they go to
// time.Timer like every other wait (timers.go, realClock).
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
//     panics are recovered (ErrPanic); past OperationTimeout an attempt
//     counts as failed (ErrTimeout) whether or not it returns, and a worker
//     stuck there is replaced; a Prune stuck there is abandoned, and the
//     objects reconciled beside it are refreshed once it returns.
//   - The waits never return early and never report success while a
//     misconfiguration keeps objects from being reconciled: they return
//     its error. Two reconcilers that would read and write the same status
//     are refused at New; where their accessors cannot be probed there,
//     health reports it, naming both, from the first object that shows it.
//   - An operation abandoned at its timeout may still act on the target
//     until it returns, if it ignores its context: its status result is
//     discarded, and no other operation on its key (or, for a Sync or a
//     Prune, no other Sync or Prune) starts until it returns, but the
//     write it makes late is the target's to guard (a fencing token, a
//     revision check).
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

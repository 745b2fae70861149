// Package reconciler makes the outside world match a statedb table.
//
// Desired objects live in a statedb table and carry a Status in a named
// field (a StatusSet when several reconcilers serve one object). You
// write the Operations that change the target; New (or Register, from a
// cell.Invoke) builds a Reconciler from a Config and the hive's Params,
// and runs it as a job of its module: it calls your operations until the
// target matches and records each object's outcome in its status.
//
// The names a program needs:
//
//	Config, New, Register, Params, Cell   build and register a reconciler
//	Operations, BatchOperations           a target taking one object (or one round) at a time
//	SyncOperations, Change, FailObjects   a target taking the whole desired set at once
//	Status, StatusKind, StatusSet         the status an object carries, by reconciler
//	StatusPending, StatusUnset            what a writer sets on every change
//	Permanent, RetryAfter                 what an operation returns to steer its retries
//	Reconciler                            the running reconciler: WaitUntilSettled,
//	                                      Explain (why is this key not Done?), Status
//	WaitForReconciliation                 wait until a table's objects are Done
//	Off                                   turn a periodic interval off
//
// The rest is for tuning (the fields of Config, Debounce), observing
// (Metrics, StatusSnapshot, Explanation), replicas (Ownership) and
// serialization.
//
// # The writer's contract
//
// Every object inserted or changed must be written with StatusPending()
// (StatusSet.Pending for several reconcilers), or StatusUnset() to keep it
// from the target for now. An object written with the Done it was copied
// with is not reconciled: the table shows the new value, the target keeps
// the old one. (The reconciler notices it where that is certain: it
// counts and logs it, and Explain says it.) Deleting an object from the
// table makes the reconciler Delete it from the target.
//
// Register an initializer on the table (Table.RegisterInitializer) and
// mark it done once the desired set is complete: until then nothing is
// pruned, and a whole-set target is not synced. A table on which no
// initializer was ever registered counts as initialized at once; for it,
// the first prune waits for the first write or InitialPruneDelay.
//
// # How a change flows
//
// The reconciler's loop reads the table's changes in revision order,
// deletes included. A change that asks for work becomes a request, at
// most Config.RoundSize outstanding at once, rounds paced by
// Config.RoundRateLimiter. Requests run on up to Config.Concurrency
// workers, on a clone of the object, never two for one primary key. The
// results of a step are committed in one write transaction; a status is
// written only while this reconciler's status in the object is still the
// one the request read, so a stale result never overwrites a newer
// change. Success marks the object Done; failure marks it Error and
// retries it with jittered exponential backoff, unless the error is
// Permanent or MaxRetries is spent (given up on until the object changes
// or refresh comes). Full reconciliation hands Prune every desired object
// once the table is initialized and every FullReconciliationInterval;
// refresh marks an object Refreshing once it has been Done (or given up
// on) for RefreshInterval, so that Update repairs drift.
//
// A target that takes the entire desired state at once (an nftables
// ruleset, a reloaded config file) is given Config.SyncOperations instead:
// changes are debounced (Config.SyncDebounce), one Sync at a time gets
// every desired object of one snapshot, and its result is written into
// every object that asked, with the same retries, health and waits.
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
//     stuck there is replaced. An operation that ignores its context may
//     still act on the target until it returns: its result is discarded,
//     and no other operation on its key starts before it returns.
//   - The waits never return early, and return an error (not nil) while a
//     misconfiguration keeps objects from being reconciled. Two
//     reconcilers that would share one status are refused at New.
//   - Bad configuration fails New with an error wrapping ErrInvalidConfig
//     that names the field.
//   - Work per round is proportional to what changed, not to the table.
//
// # Observing and testing
//
// Health is reported through the hive's job health; Status returns a
// snapshot; Explain says where one key stands and why; Metrics (see
// package metrics) receives counters, histograms and gauges. Cell adds a
// registry and the reconciler/status, explain, full, wait, suspend and
// resume script commands. Tests wait with WaitUntilSettled,
// WaitUntilReconciled or WaitForReconciliation (with index.NewStatusIndex),
// never with sleeps; the engine runs inside a testing/synctest bubble.
//
// How the engine is built, stage by stage, is in CONTRIBUTING.md.
package reconciler

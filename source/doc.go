// Package source keeps a desired-state table fed from where the desired
// state really lives: a Kubernetes API, a directory of manifests, etcd.
//
// A source lists the external items, then watches them from the list's
// resume point, and writes the objects it derives from them (Transform)
// into a statedb table that a reconciler drains. Register adds one as a job
// of the hive module it is called in; one line per source:
//
//	cell.Invoke(func(p source.Params, t statedb.RWTable[*File]) error {
//		return source.Register(source.Config[*Manifest, *File]{Name: "dir", Table: t, ...}, p)
//	})
//
// # Contract
//
//   - Initialization: a source registers a table initializer and marks
//     it done in the write transaction of its first list, once every
//     listed item has been read successfully at least once. A
//     reconciler's full reconciliation, Prune and whole-set Syncs
//     therefore never see a partial desired set. An item that fails at
//     the first list (after a restart, the objects it yielded before are
//     in no table) keeps the table uninitialized until it reads or goes;
//     Config.InitTimeout and Source.InitializeAnyway are the explicit
//     ways on. Health names the items.
//   - Relist: whenever the watch cannot resume (ErrExpired, ErrOverflow, or
//     a reconnect without a resume point), and on each Config.Resync, the
//     source lists again and replaces its rows in one transaction: rows
//     that the list no longer yields are deleted in that transaction.
//   - Ownership, one rule for writes and deletes: a source writes or
//     deletes a row only while it is its own (Config.Owns says so, or,
//     without Owns, its content is still what the source wrote), and
//     reports the item otherwise (ErrOwnedByOther). Config.Equal never
//     decides whose a row is. Several sources (and an API) can share one
//     table.
//   - Content: an object's content is that of the first item, by key,
//     that yields it; two items yielding one object are both reported
//     (ErrDuplicate). A commit applies all its items before it writes, so
//     an object that moves between items writes nothing.
//   - No-op suppression: an object equal (Config.Equal, status excluded)
//     to the row the table holds writes nothing. Only a real change is
//     written, with the status Config.Pending gives it. A relist of a
//     million unchanged items takes no write lock and triggers no
//     reconciliation.
//   - Nothing dropped: watch events are coalesced per key in a buffer of
//     at most Config.BufferSize keys and committed in batches (at most
//     Config.BufferWait after the oldest); a full buffer blocks the
//     watcher instead of dropping its events.
//   - Errors: a failed list or watch is retried with backoff; an item that
//     Transform rejects keeps the objects it had and is reported, with its
//     key and error, in health and Status.
//
// # Observing
//
// Each source reports health (OK, or Degraded with the last error, the
// failing items, what keeps the table uninitialized, and the time since
// the last successful sync or, with Config.StaleAfter, since the store
// last answered), a StatusSnapshot (Source.Status, and
// the source/status and source/resync script commands that Cell adds)
// and metrics (Metrics; NewPrometheus gives the converge_source_*
// Prometheus series, every series created at zero).
//
// # Implementing a ListerWatcher
//
// The interface is two methods, List and Watch; see ListerWatcher.
// Implementations ship for a directory (source/dirsource), etcd (the etcd
// module's etcdsource) and Kubernetes resources (the k8s module's
// k8ssource); docs/sources.md shows each.
package source

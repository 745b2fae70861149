package main

import (
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// newFileReconciler starts converge's reconciler on the desired-files
// table, with fileOps as its target. It runs as a job of the module's job
// group: it starts and stops with the hive, reports its health there, and
// registers with reconciler.Cell's registry for /status and the
// reconciler/... shell commands.
func newFileReconciler(cfg Config, p reconciler.Params, files statedb.RWTable[*File], ops *fileOps) (reconciler.Reconciler[*File], error) {
	return reconciler.New(reconciler.Config[*File]{
		Table:           files,
		GetObjectStatus: getStatus,
		SetObjectStatus: setStatus,
		CloneObject:     (*File).Clone,
		Operations:      ops,

		// A file in a directory needs the directory's object: its Update
		// waits (Blocked, not failing) until the directory is Done, and
		// the directory's Delete waits until the file is deleted.
		// Explain says what a blocked file waits for.
		DependsOn: dependsOn,

		// Changes made in the table (PUT, DELETE) are reconciled at once.
		// Changes made behind our back in the directory are not seen
		// until one of two periodic passes finds them:
		//
		//  1. Prune, every FullReconciliationInterval, removes files that
		//     are not desired.
		//  2. Refresh, on a timer of its own, marks a file Refreshing once
		//     it has been Done for RefreshInterval, and Update then
		//     repairs it if it was edited, chmod-ed or deleted.
		//
		// Both use the --full interval here, so drift is repaired within
		// one interval (plus a round) of the file's last write. A refresh
		// costs one read per file, and one status write each way in the
		// table: fine for a directory of small files every few seconds.
		// A larger target would refresh less often.
		FullReconciliationInterval: cfg.FullReconciliationInterval,
		RefreshInterval:            cfg.FullReconciliationInterval,

		// A failed write (say, a directory in the way) is retried from
		// 100ms on, doubling, but at least once per full reconciliation
		// interval, so that fixing the cause shows soon.
		RetryBackoffMax: cfg.FullReconciliationInterval,

		// Everything else keeps converge's defaults: one operation at a
		// time, and metrics from metrics.Cell.
	}, p)
}

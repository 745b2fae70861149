package reconciler

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/cilium/statedb"
)

// feed is how a run reads the table, shared by the per-object and the
// whole-set loop: the change iterator, the watch channels and the
// revision the run began at.
type feed[Obj any] struct {
	changes statedb.ChangeIterator[Obj]
	// changesWatch closes when the table has changes not read yet;
	// initWatch when the table is initialized.
	changesWatch <-chan struct{}
	initWatch    <-chan struct{}
	initialized  bool
	// startRev is the table's revision when this run began: an Error
	// status at or below it was left by an earlier run, whose retry queue
	// is gone; the objects at or below it were there before the run.
	startRev statedb.Revision
	// noInitializer is set when, as the run began, nobody had registered
	// an initializer on the table and nothing had been written to it: the
	// table counts as initialized, but its desired set may still be to
	// come.
	noInitializer bool
	warned        bool      // the wait for a first write has been logged
	openedAt      time.Time // when the run began
}

// desiredComplete reports whether the desired set is complete enough to
// remove what is not in it (Prune, a Sync): the table is initialized and,
// when no initializer was pending at New nor as the run began, it has been
// written to at least once, or Config.InitialPruneDelay has passed since
// the run began (a truly empty desired set is pruned after that delay). Otherwise it returns how long to wait. A program
// that inserts its desired objects only after start, without an
// initializer, would otherwise have its target wiped by the first prune.
func (f *feed[Obj]) desiredComplete(db *statedb.DB, table statedb.Table[Obj], delay time.Duration, log *slog.Logger) (bool, time.Duration) {
	if !f.initialized {
		return false, 0
	}
	if !f.noInitializer {
		return true, 0
	}
	if table.Revision(db.ReadTxn()) > 0 || delay == Off {
		f.noInitializer = false
		return true, 0
	}
	if wait := delay - time.Since(f.openedAt); wait > 0 {
		if !f.warned {
			f.warned = true
			log.Warn("Nothing is pruned until the first write to the table, or InitialPruneDelay: it has no pending initializer. "+
				"Register one with RegisterInitializer and mark it done once the desired set is complete.", "delay", delay)
		}
		return false, wait
	}
	f.noInitializer = false
	return true, 0
}

// open starts reading table's changes. The first read is due at once
// (changesWatch is closed). The initialization is read now rather than
// only through initWatch: in a loop's select a ready change can win over
// a ready init channel, and the first full reconciliation or Sync would
// start late.
func (f *feed[Obj]) open(db *statedb.DB, table statedb.RWTable[Obj], initializerAtNew bool) error {
	wtxn := db.WriteTxn(table)
	changes, err := table.Changes(wtxn)
	txn := wtxn.Commit()
	if err != nil {
		return fmt.Errorf("watching %s for changes: %w", table.Name(), err)
	}
	f.changes = changes
	f.startRev = table.Revision(txn)
	f.initialized, f.initWatch = table.Initialized(txn)
	f.noInitializer = !initializerAtNew && f.startRev == 0 && len(table.PendingInitializers(txn)) == 0
	f.openedAt = time.Now()
	f.changesWatch = closedCh
	return nil
}

package reconciler

import (
	"fmt"

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
	// table counts as initialized, but its desired set is most likely
	// still to come. (PendingInitializers is nil only when no
	// initializer was ever registered.)
	noInitializer bool
}

// open starts reading table's changes. The first read is due at once
// (changesWatch is closed). The initialization is read now rather than
// only through initWatch: in a loop's select a ready change can win over
// a ready init channel, and the first full reconciliation or Sync would
// start late.
func (f *feed[Obj]) open(db *statedb.DB, table statedb.RWTable[Obj]) error {
	wtxn := db.WriteTxn(table)
	changes, err := table.Changes(wtxn)
	txn := wtxn.Commit()
	if err != nil {
		return fmt.Errorf("watching %s for changes: %w", table.Name(), err)
	}
	f.changes = changes
	f.startRev = table.Revision(txn)
	f.initialized, f.initWatch = table.Initialized(txn)
	f.noInitializer = f.startRev == 0 && table.PendingInitializers(txn) == nil
	f.changesWatch = closedCh
	return nil
}

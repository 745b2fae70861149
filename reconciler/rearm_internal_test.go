package reconciler

import (
	"testing"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
)

// rearmRow is a row of TestRearmSleepsUntilTheNextCommit's table.
type rearmRow string

func (rearmRow) TableHeader() []string { return []string{"Row"} }
func (r rearmRow) TableRow() []string  { return []string{string(r)} }

var rearmIndex = statedb.Index[rearmRow, string]{
	Name:       "s",
	FromObject: func(s rearmRow) index.KeySet { return index.NewKeySet(index.String(string(s))) },
	FromKey:    index.String,
	Unique:     true,
}

// TestRearmSleepsUntilTheNextCommit: after a read that took every change,
// the channel a loop sleeps on is open until the next commit (statedb's
// own is closed after any read that found changes, which would wake the
// loop at once for a step that reads nothing), and closed when a commit
// came after the snapshot read, whose change the next read returns.
func TestRearmSleepsUntilTheNextCommit(t *testing.T) {
	db := statedb.New()
	table, err := statedb.NewTable(db, "rearm", rearmIndex)
	if err != nil {
		t.Fatal(err)
	}
	insert := func(s rearmRow) {
		wtxn := db.WriteTxn(table)
		if _, _, err := table.Insert(wtxn, s); err != nil {
			t.Fatal(err)
		}
		wtxn.Commit()
	}
	wtxn := db.WriteTxn(table)
	it, err := table.Changes(wtxn)
	if err != nil {
		t.Fatal(err)
	}
	wtxn.Commit()
	defer it.Close()
	read := func(txn statedb.ReadTxn) ([]rearmRow, <-chan struct{}) {
		var got []rearmRow
		seq, watch := it.Next(txn)
		for ch := range seq {
			got = append(got, ch.Object)
		}
		return got, watch
	}

	insert("a")
	txn := db.ReadTxn()
	got, watch := read(txn)
	if len(got) != 1 || got[0] != "a" {
		t.Fatalf("read %v, want [a]", got)
	}
	if !isClosed(watch) {
		t.Fatal("statedb's channel after a read with changes is open: rearm has nothing to do (see its comment)")
	}
	watch = rearm(it, txn, watch)
	if isClosed(watch) {
		t.Fatal("rearmed after every change was read, the channel is closed: the loop would wake for nothing")
	}
	insert("b")
	if !isClosed(watch) {
		t.Fatal("the rearmed channel did not close on the next commit")
	}

	// A commit after the snapshot read: the rearmed channel is closed, and
	// the next read returns that commit's change.
	txn = db.ReadTxn()
	got, watch = read(txn)
	if len(got) != 1 || got[0] != "b" {
		t.Fatalf("read %v, want [b]", got)
	}
	insert("c")
	if watch = rearm(it, txn, watch); !isClosed(watch) {
		t.Fatal("a commit came after the snapshot read, and the rearmed channel is open: its change would wait")
	}
	if got, _ = read(db.ReadTxn()); len(got) != 1 || got[0] != "c" {
		t.Fatalf("read %v after the commit, want [c]", got)
	}
}

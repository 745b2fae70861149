package bench

import (
	"strconv"
	"testing"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"go.uber.org/goleak"
)

type obj struct{ id uint64 }

func (o obj) TableHeader() []string { return []string{"ID"} }
func (o obj) TableRow() []string    { return []string{strconv.FormatUint(o.id, 10)} }

var ids = statedb.Index[obj, uint64]{
	Name:       "id",
	FromObject: func(o obj) index.KeySet { return index.NewKeySet(index.Uint64(o.id)) },
	FromKey:    index.Uint64,
	Unique:     true,
}

// TestPreload: every id is inserted, once, with batches that do not
// divide the count.
func TestPreload(t *testing.T) {
	db := statedb.New()
	table, err := statedb.NewTable(db, "objs", ids)
	if err != nil {
		t.Fatal(err)
	}
	if err := Preload(db, table, 2500, 1000, func(id uint64) obj { return obj{id} }); err != nil {
		t.Fatal(err)
	}
	txn := db.ReadTxn()
	if n := table.NumObjects(txn); n != 2500 {
		t.Fatalf("%d objects, want 2500", n)
	}
	for _, id := range []uint64{0, 999, 1000, 2499} {
		if _, _, ok := table.Get(txn, ids.Query(id)); !ok {
			t.Fatalf("id %d is missing", id)
		}
	}
}

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

package source_test

import (
	"testing"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/source/sourcetest"
)

// A source over an empty store initializes the table empty and then
// applies what is added.
func TestEmptyStart(t *testing.T) {
	st := sourcetest.NewStore[string]()
	f, _ := oneSource(t, st, nil)
	f.waitTable("initialized", func(txn statedb.ReadTxn) bool { init, _ := f.table.Initialized(txn); return init })
	st.Set("a", "1")
	f.waitTable("a", func(txn statedb.ReadTxn) bool { return f.table.NumObjects(txn) == 1 })
}

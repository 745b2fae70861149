package reconciler

import (
	"fmt"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
)

// Requirements on another table's rows (Config.Requires): a route needs
// its device, which lives in a devices table that no reconciler of ours
// writes. A requirement gates an Update as DependsOn does (Blocked until
// every row it names is in its table, and ready), and is released by that
// table's changes: the loop reads them with a change iterator of its own,
// woken by its watch channel, as it reads its own table's. No polling.

// Requirement is what an object needs of another table before its Update
// may start. Make one with Requires.
type Requirement[Obj any] interface {
	// needOf is the engine's view of it, unexported: only Requires
	// makes one.
	needOf() need[Obj]
}

// Requires says that an object needs, in table (another table than the
// reconciler's own), the rows whose primary keys keys(obj) returns: the
// primary index's key bytes, as DependsOn names its keys
// (index.String(name) for a string key). A row counts once it is in the
// table and, when ready is not nil, ready(row) is true: ready is how a
// route waits for its device to be up, or for a row another reconciler
// writes to be Done for it (ready reads that reconciler's status). ready
// and keys must be quick and must not block: the loop calls them.
//
// Until every row is there the key is Blocked, as with DependsOn (no
// attempt, no retry, no failure; Explain says which row it waits for and
// why), and it is released in the step that reads the change that brings
// the last row. A row only gates: its removal or a change after the
// Update started does not run the object again, nor delete it; and a
// Delete never waits for another table. table's primary index must be a
// statedb.Index (every index statedb makes is), so that a key is looked
// up, not searched.
func Requires[Obj, Row any](table statedb.Table[Row], keys func(obj Obj) []index.Key, ready func(row Row) bool) Requirement[Obj] {
	n := &rowNeed[Obj, Row]{table: table, keys: keys, ready: ready}
	if table != nil {
		n.byKey, _ = table.PrimaryIndexer().(interface {
			QueryFromKey(index.Key) statedb.Query[Row]
		})
	}
	return n
}

// need is a requirement as the engine uses it, whatever the row's type.
type need[Obj any] interface {
	// name is the table's name, for Explain and errors.
	name() string
	// check says what is wrong with the requirement, or nil.
	check() error
	// keysOf returns the keys obj needs.
	keysOf(obj Obj) []index.Key
	// state says whether the row with key is there and ready in txn, and
	// if not, why.
	state(txn statedb.ReadTxn, key string) (bool, string)
	// inDB says whether the table is db's: statedb reads a table by its
	// place in its database.
	inDB(db *statedb.DB) error
	// open starts reading the table's changes, for one run.
	open(db *statedb.DB) (needFeed, error)
}

// needFeed is one run's reader of a required table's changes: read calls
// fn with the primary key of each row inserted or changed since the last
// read, up to txn, and returns a channel that closes when there are more.
type needFeed interface {
	read(txn statedb.ReadTxn, fn func(key string)) <-chan struct{}
	close()
}

// rowNeed is Requires' requirement. It holds nothing of a run: a Config
// may be used again, or by two reconcilers.
type rowNeed[Obj, Row any] struct {
	table statedb.Table[Row]
	keys  func(Obj) []index.Key
	ready func(Row) bool
	byKey interface {
		QueryFromKey(index.Key) statedb.Query[Row]
	} // nil: not a statedb.Index
}

func (n *rowNeed[Obj, Row]) needOf() need[Obj] { return n }

func (n *rowNeed[Obj, Row]) name() string { return n.table.Name() }

func (n *rowNeed[Obj, Row]) check() error {
	switch {
	case n.table == nil:
		return fmt.Errorf("%w: Config.Requires: a requirement has no table", ErrInvalidConfig)
	case n.keys == nil:
		return fmt.Errorf("%w: Config.Requires: the requirement on table %s has no keys function", ErrInvalidConfig, n.table.Name())
	case n.byKey == nil:
		return fmt.Errorf("%w: Config.Requires: table %s's primary index is not a statedb.Index: its rows cannot be looked up by key",
			ErrInvalidConfig, n.table.Name())
	}
	return nil
}

func (n *rowNeed[Obj, Row]) keysOf(obj Obj) []index.Key { return n.keys(obj) }

func (n *rowNeed[Obj, Row]) state(txn statedb.ReadTxn, key string) (bool, string) {
	row, _, found := n.table.Get(txn, n.byKey.QueryFromKey(index.Key(key)))
	switch {
	case !found:
		return false, "not in the table"
	case n.ready != nil && !n.ready(row):
		return false, "not ready"
	}
	return true, ""
}

func (n *rowNeed[Obj, Row]) inDB(db *statedb.DB) error {
	if db.GetTable(db.ReadTxn(), n.table.Name()) != statedb.TableMeta(n.table) {
		// statedb finds a table by its place in the database: another
		// database's would read the wrong one.
		return fmt.Errorf("%w: Config.Requires: table %s is not registered in the reconciler's database",
			ErrInvalidConfig, n.table.Name())
	}
	return nil
}

func (n *rowNeed[Obj, Row]) open(db *statedb.DB) (needFeed, error) {
	if err := n.inDB(db); err != nil {
		return nil, err
	}
	wtxn := db.WriteTxn(n.table)
	changes, err := n.table.Changes(wtxn)
	wtxn.Commit()
	if err != nil {
		return nil, fmt.Errorf("watching %s for changes (Config.Requires): %w", n.table.Name(), err)
	}
	return &rowFeed[Row]{changes: changes, primary: n.table.PrimaryIndexer()}, nil
}

// rowFeed reads a required table's changes for one run.
type rowFeed[Row any] struct {
	changes statedb.ChangeIterator[Row]
	primary statedb.Indexer[Row]
}

func (f *rowFeed[Row]) read(txn statedb.ReadTxn, fn func(key string)) <-chan struct{} {
	seq, watch := f.changes.Next(txn)
	for ch := range seq {
		if ch.Deleted {
			continue // a row going away meets nothing
		}
		if k, ok := f.primary.ObjectToKey(ch.Object); ok {
			fn(string(k))
		}
	}
	return rearm(f.changes, txn, watch)
}

func (f *rowFeed[Row]) close() { f.changes.Close() }

package index

import (
	"github.com/cilium/statedb"
	sdbindex "github.com/cilium/statedb/index"

	"github.com/converge-go/converge/reconciler"
)

// DefaultStatusIndexName is the index name NewStatusIndex uses when given
// an empty name.
const DefaultStatusIndexName = "status"

// NewStatusIndex returns a non-unique statedb index of objects by the kind
// of the status that getStatus reads from them, for use as a secondary
// index of the table a reconciler works on. Query it with
// idx.Query(reconciler.StatusKindError) and the like.
//
// name is the index's name, which must be unique within the table; ""
// means DefaultStatusIndexName ("status"). A table with several
// reconcilers (reconciler.StatusSet) takes one index per reconciler, each
// under its own name. statedb.NewTable rejects a name that another index
// of the table already has.
//
// The index's FromString accepts the kind names "Pending", "Refreshing",
// "Done", "Error" and "Unset" (case-sensitive) and fails for any other string with
// an error wrapping reconciler.ErrUnknownStatusKind. An object whose
// status kind is out of range is indexed under a key that no query for a
// valid kind matches.
//
// NewStatusIndex panics if getStatus is nil: that is a programming error
// best caught where the index is declared, not on the first insert.
func NewStatusIndex[Obj any](name string, getStatus func(Obj) reconciler.Status) statedb.Index[Obj, reconciler.StatusKind] {
	if getStatus == nil {
		panic("index.NewStatusIndex: getStatus is nil")
	}
	if name == "" {
		name = DefaultStatusIndexName
	}
	return statedb.Index[Obj, reconciler.StatusKind]{
		Name: name,
		FromObject: func(obj Obj) sdbindex.KeySet {
			return statusKeySets[getStatus(obj).Kind]
		},
		FromKey:    reconciler.StatusKind.Key,
		FromString: statusKeyFromString,
		Unique:     false,
	}
}

// statusKeySets holds the key set of every StatusKind value (a uint8, so
// any kind indexes it), built once.
// statedb calls FromObject for the old and the new object of every write,
// and index.NewKeySet allocates its variadic slice on each call: at a
// million status writes that was 4% of all bytes allocated. A KeySet is
// read-only, so one value per kind can be shared by every object.
var statusKeySets = func() (sets [256]sdbindex.KeySet) {
	for k := range sets {
		sets[k] = sdbindex.NewKeySet(reconciler.StatusKind(k).Key())
	}
	return sets
}()

// statusKeyFromString parses a kind name into its index key.
func statusKeyFromString(s string) (sdbindex.Key, error) {
	kind, err := reconciler.ParseStatusKind(s)
	if err != nil {
		return nil, err
	}
	return kind.Key(), nil
}

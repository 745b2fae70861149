package index_test

import (
	"errors"
	"iter"
	"slices"
	"testing"

	"github.com/cilium/statedb"
	sdbindex "github.com/cilium/statedb/index"

	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
)

// testObj carries a single status and a status set, so one type serves
// both the one-reconciler and the several-reconcilers cases.
type testObj struct {
	ID       string
	Status   reconciler.Status
	Statuses reconciler.StatusSet
}

// TableHeader implements statedb.TableWritable. It must not read o:
// statedb calls it on a nil *testObj.
func (*testObj) TableHeader() []string { return []string{"ID", "Status"} }

// TableRow implements statedb.TableWritable.
func (o *testObj) TableRow() []string { return []string{o.ID, o.Status.String()} }

var testIDIndex = statedb.Index[*testObj, string]{
	Name: "id",
	FromObject: func(o *testObj) sdbindex.KeySet {
		return sdbindex.NewKeySet(sdbindex.String(o.ID))
	},
	FromKey:    sdbindex.String,
	FromString: sdbindex.FromString,
	Unique:     true,
}

// newTestDB returns a started database that the test stops.
func newTestDB(t *testing.T) *statedb.DB {
	t.Helper()
	db := statedb.New()
	if err := db.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Stop(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// ids collects the sorted IDs of the objects a query yields.
func ids(objs iter.Seq2[*testObj, statedb.Revision]) []string {
	var out []string
	for o := range objs {
		out = append(out, o.ID)
	}
	slices.Sort(out)
	return out
}

func insert(t *testing.T, db *statedb.DB, table statedb.RWTable[*testObj], objs ...*testObj) {
	t.Helper()
	txn := db.WriteTxn(table)
	defer txn.Abort()
	for _, o := range objs {
		if _, _, err := table.Insert(txn, o); err != nil {
			t.Fatalf("Insert(%s): %v", o.ID, err)
		}
	}
	txn.Commit()
}

func TestStatusIndexQuery(t *testing.T) {
	db := newTestDB(t)
	statusIdx := index.NewStatusIndex("", func(o *testObj) reconciler.Status { return o.Status })
	table, err := statedb.NewTable(db, "objs", testIDIndex, statusIdx)
	if err != nil {
		t.Fatal(err)
	}
	insert(t, db, table,
		&testObj{ID: "e1", Status: reconciler.StatusError(errors.New("boom"))},
		&testObj{ID: "e2", Status: reconciler.StatusError(nil)},
		&testObj{ID: "e3", Status: reconciler.Status{Kind: reconciler.StatusKindError}},
		&testObj{ID: "d1", Status: reconciler.StatusDone()},
		&testObj{ID: "d2", Status: reconciler.StatusDone()},
		&testObj{ID: "p1", Status: reconciler.StatusPending()},
		&testObj{ID: "z1"}, // the zero status is Pending
		&testObj{ID: "r1", Status: reconciler.StatusRefreshing()},
		&testObj{ID: "x1", Status: reconciler.Status{Kind: 9}}, // corrupt: in no kind's list
	)

	want := map[reconciler.StatusKind][]string{
		reconciler.StatusKindError:      {"e1", "e2", "e3"},
		reconciler.StatusKindDone:       {"d1", "d2"},
		reconciler.StatusKindPending:    {"p1", "z1"},
		reconciler.StatusKindRefreshing: {"r1"},
	}
	check := func(when string) {
		t.Helper()
		txn := db.ReadTxn()
		for kind, wantIDs := range want {
			if got := ids(table.List(txn, statusIdx.Query(kind))); !slices.Equal(got, wantIDs) {
				t.Errorf("%s: %v objects = %v, want %v", when, kind, got, wantIDs)
			}
		}
	}
	check("after insert")
	if n := table.NumObjects(db.ReadTxn()); n != 9 {
		t.Errorf("NumObjects = %d, want 9", n)
	}

	// Updates move objects between kinds.
	insert(t, db, table,
		&testObj{ID: "e1", Status: reconciler.StatusDone()},
		&testObj{ID: "p1", Status: reconciler.StatusError(errors.New("late"))},
	)
	want[reconciler.StatusKindError] = []string{"e2", "e3", "p1"}
	want[reconciler.StatusKindDone] = []string{"d1", "d2", "e1"}
	want[reconciler.StatusKindPending] = []string{"z1"}
	check("after update")

	// Deletes leave the index.
	txn := db.WriteTxn(table)
	if _, _, err := table.Delete(txn, &testObj{ID: "e2"}); err != nil {
		t.Fatal(err)
	}
	txn.Commit()
	want[reconciler.StatusKindError] = []string{"e3", "p1"}
	check("after delete")

	// Get by kind finds one of them.
	if o, _, ok := table.Get(db.ReadTxn(), statusIdx.Query(reconciler.StatusKindRefreshing)); !ok || o.ID != "r1" {
		t.Errorf("Get(Refreshing) = %v, %v", o, ok)
	}
}

func TestStatusIndexNames(t *testing.T) {
	get := func(o *testObj) reconciler.Status { return o.Status }
	if index.DefaultStatusIndexName != "status" {
		t.Errorf("DefaultStatusIndexName = %q, want status", index.DefaultStatusIndexName)
	}
	if got := index.NewStatusIndex("", get).Name; got != index.DefaultStatusIndexName {
		t.Errorf(`NewStatusIndex("").Name = %q, want "status"`, got)
	}
	idx := index.NewStatusIndex("routes-status", get)
	if idx.Name != "routes-status" || idx.Unique {
		t.Errorf("Name %q, Unique %v; want routes-status, false", idx.Name, idx.Unique)
	}

	// Two unnamed status indexes on one table collide.
	db := newTestDB(t)
	_, err := statedb.NewTable(db, "dups", testIDIndex, index.NewStatusIndex("", get), index.NewStatusIndex("", get))
	if !errors.Is(err, statedb.ErrDuplicateIndex) {
		t.Errorf("two indexes named status: NewTable error = %v, want ErrDuplicateIndex", err)
	}
}

func TestStatusIndexTwoReconcilers(t *testing.T) {
	db := newTestDB(t)
	idxA := index.NewStatusIndex("status-a", func(o *testObj) reconciler.Status { return o.Statuses.Get("a") })
	idxB := index.NewStatusIndex("status-b", func(o *testObj) reconciler.Status { return o.Statuses.Get("b") })
	table, err := statedb.NewTable(db, "shared", testIDIndex, idxA, idxB)
	if err != nil {
		t.Fatal(err)
	}
	fresh := reconciler.NewStatusSet()
	insert(t, db, table,
		&testObj{ID: "1", Statuses: fresh}, // both Pending
		&testObj{ID: "2", Statuses: fresh.Set("a", reconciler.StatusDone())},
		&testObj{ID: "3", Statuses: fresh.Set("a", reconciler.StatusDone()).Set("b", reconciler.StatusError(nil))},
		&testObj{ID: "4", Statuses: fresh.Set("a", reconciler.StatusDone()).Set("b", reconciler.StatusDone()).Pending()},
	)
	txn := db.ReadTxn()
	for _, c := range []struct {
		idx  statedb.Index[*testObj, reconciler.StatusKind]
		kind reconciler.StatusKind
		want []string
	}{
		{idxA, reconciler.StatusKindPending, []string{"1", "4"}},
		{idxA, reconciler.StatusKindDone, []string{"2", "3"}},
		{idxA, reconciler.StatusKindError, nil},
		{idxB, reconciler.StatusKindPending, []string{"1", "2", "4"}},
		{idxB, reconciler.StatusKindDone, nil},
		{idxB, reconciler.StatusKindError, []string{"3"}},
	} {
		if got := ids(table.List(txn, c.idx.Query(c.kind))); !slices.Equal(got, c.want) {
			t.Errorf("%s %v = %v, want %v", c.idx.Name, c.kind, got, c.want)
		}
	}
}

func TestStatusIndexFromString(t *testing.T) {
	db := newTestDB(t)
	statusIdx := index.NewStatusIndex("", func(o *testObj) reconciler.Status { return o.Status })
	table, err := statedb.NewTable(db, "objs", testIDIndex, statusIdx)
	if err != nil {
		t.Fatal(err)
	}
	insert(t, db, table,
		&testObj{ID: "a", Status: reconciler.StatusError(nil)},
		&testObj{ID: "b", Status: reconciler.StatusError(nil)},
		&testObj{ID: "c", Status: reconciler.StatusDone()},
	)

	for _, kind := range []reconciler.StatusKind{
		reconciler.StatusKindPending, reconciler.StatusKindRefreshing, reconciler.StatusKindDone, reconciler.StatusKindError,
	} {
		key, err := statusIdx.FromString(kind.String())
		if err != nil || !key.Equal(kind.Key()) {
			t.Errorf("FromString(%q) = %q, %v; want %q", kind, key, err, kind.Key())
		}
	}

	// The path the db/show and db/get script commands take.
	anyTable := statedb.AnyTable{Meta: table}
	txn := db.ReadTxn()
	for name, want := range map[string]int{"Error": 2, "Done": 1, "Pending": 0} {
		objs, err := anyTable.List(txn, "status", name)
		if err != nil {
			t.Fatalf("List(status, %q): %v", name, err)
		}
		n := 0
		for range objs {
			n++
		}
		if n != want {
			t.Errorf("List(status, %q) gave %d objects, want %d", name, n, want)
		}
	}

	for _, bad := range []string{"", "error", "ERROR", "E", "Bogus", "StatusKind(9)"} {
		if key, err := statusIdx.FromString(bad); !errors.Is(err, reconciler.ErrUnknownStatusKind) {
			t.Errorf("FromString(%q) = %q, %v; want ErrUnknownStatusKind", bad, key, err)
		}
		if _, err := anyTable.List(txn, "status", bad); !errors.Is(err, reconciler.ErrUnknownStatusKind) {
			t.Errorf("List(status, %q) error = %v, want ErrUnknownStatusKind", bad, err)
		}
	}
}

func TestStatusIndexNilGetStatus(t *testing.T) {
	defer func() {
		if r := recover(); r == nil {
			t.Errorf("NewStatusIndex with nil getStatus did not panic")
		}
	}()
	index.NewStatusIndex[*testObj]("", nil)
}

func TestStatusIndexFromObject(t *testing.T) {
	statusIdx := index.NewStatusIndex("", func(o *testObj) reconciler.Status { return o.Status })
	obj := &testObj{ID: "a", Status: reconciler.StatusDone()}
	ks := statusIdx.FromObject(obj)
	first, ok := ks.First()
	if !ok || !first.Equal(reconciler.StatusKindDone.Key()) || !ks.Exists(reconciler.StatusKindDone.Key()) || ks.Exists(reconciler.StatusKindError.Key()) {
		t.Errorf("FromObject keys = %q", first)
	}
	if !statusIdx.FromKey(reconciler.StatusKindError).Equal(reconciler.StatusKindError.Key()) {
		t.Errorf("FromKey(Error) != StatusKindError.Key()")
	}
}

// TestStatusIndexFromObjectKinds checks the shared key sets against Key for
// every StatusKind value, valid or not, and that FromObject does not
// allocate: it runs for the old and the new object of every status write.
func TestStatusIndexFromObjectKinds(t *testing.T) {
	statusIdx := index.NewStatusIndex("", func(o *testObj) reconciler.Status { return o.Status })
	for k := range 256 {
		kind := reconciler.StatusKind(k)
		ks := statusIdx.FromObject(&testObj{ID: "a", Status: reconciler.Status{Kind: kind}})
		if first, ok := ks.First(); !ok || !first.Equal(kind.Key()) {
			t.Errorf("kind %d: FromObject key %q, want %q", k, first, kind.Key())
		}
		n := 0
		ks.Foreach(func(sdbindex.Key) { n++ })
		if n != 1 {
			t.Errorf("kind %d: FromObject gave %d keys, want 1", k, n)
		}
	}
	obj := &testObj{ID: "a", Status: reconciler.StatusDone()}
	if allocs := testing.AllocsPerRun(100, func() { statusIdx.FromObject(obj) }); allocs != 0 {
		t.Errorf("FromObject allocates %v times per call, want 0", allocs)
	}
}

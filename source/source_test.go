package source_test

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

// oneSource starts a hive with one source over st, configured by cfgFn,
// and returns the fixture and the source.
func oneSource(t *testing.T, st *sourcetest.Store[string], cfgFn func(*source.Config[string, *obj])) (*fixture, source.Source) {
	t.Helper()
	var src source.Source
	f := newFixture(t, func(f *fixture, p source.Params) (err error) {
		cfg := storeConfig("s", f.table, st)
		if cfgFn != nil {
			cfgFn(&cfg)
		}
		src, err = source.New(cfg, p)
		return err
	})
	f.start(time.Minute)
	return f, src
}

// observe records the table's contents at every commit it sees, from a
// goroutine that wakes on the table's watch channel, until the returned
// function is called; that returns the states seen, in order. A state
// between the parts of a non-atomic write would be among them.
func observe(f *fixture) func() []map[string]string {
	stop := make(chan struct{})
	done := make(chan []map[string]string)
	go func() {
		var states []map[string]string
		for {
			txn := f.db.ReadTxn()
			_, watch := f.table.AllWatch(txn)
			states = append(states, f.contents(txn, ""))
			select {
			case <-watch:
			case <-stop:
				done <- states
				return
			}
		}
	}()
	return func() []map[string]string {
		close(stop)
		return <-done
	}
}

// The first list (large enough to be compared on several goroutines) is
// committed in one transaction together with the
// initializer: the table is never initialized with part of the list, nor
// holds part of it before.
func TestInitialListIsOneTransaction(t *testing.T) {
	st := sourcetest.NewStore[string]()
	for i := range 40_000 {
		st.Set(fmt.Sprintf("k%05d", i), "v")
	}
	var f *fixture
	var src source.Source
	var states func() []map[string]string
	f = newFixture(t, func(f *fixture, p source.Params) (err error) {
		src, err = source.New(storeConfig("s", f.table, st), p)
		return err
	})
	// The fixture's tables exist once the hive is populated.
	if err := f.hive.Populate(f.log); err != nil {
		t.Fatal(err)
	}
	states = observe(f)
	init, initWatch := f.table.Initialized(f.db.ReadTxn())
	if init {
		t.Fatal("table initialized before the source listed")
	}
	f.start(time.Minute)
	select {
	case <-initWatch:
	case <-time.After(20 * time.Second):
		t.Fatal("table not initialized")
	}
	txn := f.db.ReadTxn()
	if n := f.table.NumObjects(txn); n != 40_000 {
		t.Fatalf("initialized with %d objects, want 40000", n)
	}
	for _, st := range states() {
		if n := len(st); n != 0 && n != 40_000 {
			t.Fatalf("saw a table with %d objects: the list was not committed at once", n)
		}
	}
	s := waitStatus(t, src, "initialized", func(s source.StatusSnapshot) bool { return s.Initialized })
	if s.LastRelist.Reason != source.ReasonInitial || s.LastRelist.Upserts != 40_000 {
		t.Fatalf("status after the initial list: %+v", s.LastRelist)
	}
}

// A relist after an expired resume point replaces the source's rows in one
// transaction: the rows it no longer lists are deleted in it.
func TestRelistReplacesAtomically(t *testing.T) {
	st := sourcetest.NewStore[string]()
	for _, k := range []string{"a", "b", "c"} {
		st.Set(k, "1")
	}
	var expire atomic.Bool
	st.Faults = func(source.Event[string]) sourcetest.Fault {
		if expire.CompareAndSwap(true, false) {
			return sourcetest.Expire
		}
		return sourcetest.None
	}
	// Lists wait at the gate while it is set, so that the relist sees
	// all three changes below, not the first one only.
	var gate atomic.Pointer[chan struct{}]
	st.ListErr = func() error {
		if g := gate.Load(); g != nil {
			<-*g
		}
		return nil
	}
	f, src := oneSource(t, st, nil)
	f.waitTable("initial list", func(txn statedb.ReadTxn) bool { return f.table.NumObjects(txn) == 3 })
	states := observe(f)
	before := map[string]string{"a": "1", "b": "1", "c": "1"}

	// The watch fails at the next event; the changes below reach the
	// table only through the relist.
	g := make(chan struct{})
	gate.Store(&g)
	expire.Store(true)
	st.Delete("b")
	st.Set("c", "2")
	st.Set("d", "1")
	close(g)
	want := map[string]string{"a": "1", "c": "2", "d": "1"}
	f.waitTable("relist", func(txn statedb.ReadTxn) bool { return mapsEqual(f.contents(txn, ""), want) })
	for _, st := range states() {
		if !mapsEqual(st, before) && !mapsEqual(st, want) {
			t.Fatalf("saw %v between %v and %v: the relist was not one transaction", st, before, want)
		}
	}
	s := waitStatus(t, src, "relist recorded", func(s source.StatusSnapshot) bool { return s.Relists == 2 })
	if s.LastRelist.Reason != source.ReasonExpired || s.LastRelist.Upserts != 2 || s.LastRelist.Deletes != 1 {
		t.Fatalf("last relist %+v, want expired with 2 upserts and 1 delete", s.LastRelist)
	}
}

// An event or a relist entry equal to the row writes nothing: the status
// stays as it is and the table's revision does not move.
func TestNoOpSuppression(t *testing.T) {
	st := sourcetest.NewStore[string]()
	for i := range 1000 {
		st.Set(strconv.Itoa(i), "v")
	}
	var writes atomic.Int64
	f, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) {
		cfg.Pending = func(o *obj) *obj { writes.Add(1); return pending(o) }
	})
	f.waitTable("initial list", func(txn statedb.ReadTxn) bool { return f.table.NumObjects(txn) == 1000 })
	rev := f.table.Revision(f.db.ReadTxn())

	// Duplicate events, then a real change after them as a marker.
	for i := range 100 {
		st.Set(strconv.Itoa(i), "v")
	}
	st.Set("marker", "m")
	f.waitTable("marker", func(txn statedb.ReadTxn) bool { return f.table.NumObjects(txn) == 1001 })
	if got := writes.Load(); got != 1001 {
		t.Fatalf("%d writes after 100 duplicate events, want 1001", got)
	}

	// Resyncs of unchanged items write nothing.
	for i := range 3 {
		before := src.Status().Relists
		src.Resync()
		s := waitStatus(t, src, "resync", func(s source.StatusSnapshot) bool { return s.Relists > before })
		if s.LastRelist.Reason != source.ReasonResync || s.LastRelist.Items != 1001 || s.LastRelist.Upserts != 0 || s.LastRelist.Deletes != 0 {
			t.Fatalf("resync %d: %+v", i, s.LastRelist)
		}
	}
	if got := writes.Load(); got != 1001 {
		t.Fatalf("%d writes after resyncs, want 1001", got)
	}
	if got := f.table.Revision(f.db.ReadTxn()); got != rev+1 {
		t.Fatalf("table revision %d, want %d (one write: the marker)", got, rev+1)
	}
}

// Config.Resync relists periodically.
func TestPeriodicResync(t *testing.T) {
	st := sourcetest.NewStore[string]()
	st.Set("a", "1")
	_, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) { cfg.Resync = 5 * time.Millisecond })
	s := waitStatus(t, src, "two resyncs", func(s source.StatusSnapshot) bool { return s.Relists >= 3 })
	if s.LastRelist.Reason != source.ReasonResync {
		t.Fatalf("last relist %+v, want a resync", s.LastRelist)
	}
}

// A watch that cannot resume (no resume point) relists on reconnect; one
// with a resume point resumes without listing.
func TestReconnect(t *testing.T) {
	for _, noResume := range []bool{false, true} {
		t.Run(fmt.Sprintf("noResume=%v", noResume), func(t *testing.T) {
			st := sourcetest.NewStore[string]()
			st.NoResume = noResume
			st.Set("a", "1")
			var disconnect atomic.Bool
			st.Faults = func(source.Event[string]) sourcetest.Fault {
				if disconnect.CompareAndSwap(true, false) {
					return sourcetest.Disconnect
				}
				return sourcetest.None
			}
			f, src := oneSource(t, st, nil)
			f.waitTable("initial list", func(txn statedb.ReadTxn) bool { return f.table.NumObjects(txn) == 1 })
			// Without a resume point a change made before the watch
			// starts is missed (until a resync): wait for the watch.
			waitStatus(t, src, "watching", func(source.StatusSnapshot) bool { return st.Watching() == 1 })
			disconnect.Store(true)
			st.Set("b", "1")
			f.waitTable("b", func(txn statedb.ReadTxn) bool { return f.table.NumObjects(txn) == 2 })
			s := waitStatus(t, src, "b committed", func(s source.StatusSnapshot) bool { return s.Upserts == 2 })
			wantRelists := uint64(1)
			if noResume {
				// Without a resume point the source cannot watch at all:
				// it relists at once, and again at the disconnect.
				wantRelists = s.Relists
				if s.LastRelist.Reason != source.ReasonReconnect {
					t.Fatalf("last relist %+v, want reconnect", s.LastRelist)
				}
			}
			if s.Relists != wantRelists {
				t.Fatalf("%d relists, want %d", s.Relists, wantRelists)
			}
		})
	}
}

func TestConfigValidation(t *testing.T) {
	st := sourcetest.NewStore[string]()
	for _, tc := range []struct {
		field string
		mod   func(*source.Config[string, *obj])
	}{
		{"Name", func(c *source.Config[string, *obj]) { c.Name = "" }},
		{"ListerWatcher", func(c *source.Config[string, *obj]) { c.ListerWatcher = nil }},
		{"Transform", func(c *source.Config[string, *obj]) { c.Transform = nil }},
		{"Equal", func(c *source.Config[string, *obj]) { c.Equal = nil }},
		{"BufferSize", func(c *source.Config[string, *obj]) { c.BufferSize = -1 }},
		{"Resync", func(c *source.Config[string, *obj]) { c.Resync = -2 }},
		{"BackoffMin", func(c *source.Config[string, *obj]) { c.BackoffMax = time.Nanosecond }},
	} {
		f := newFixture(t, func(f *fixture, p source.Params) error {
			cfg := storeConfig("s", f.table, st)
			tc.mod(&cfg)
			_, err := source.New(cfg, p)
			return err
		})
		err := f.hive.Populate(f.log)
		if err == nil || !errorsIs(err, source.ErrInvalidConfig) || !contains(err.Error(), tc.field) {
			t.Errorf("%s: got %v, want ErrInvalidConfig naming the field", tc.field, err)
		}
	}
}

// Two sources and an API writer share one table: each source's relist and
// deletes touch only its own rows, and a source never overwrites a row
// another writer owns.
func TestSeveralSourcesShareTable(t *testing.T) {
	a, b := sourcetest.NewStore[string](), sourcetest.NewStore[string]()
	a.Set("a1", "1")
	a.Set("a2", "1")
	b.Set("b1", "1")
	var srcA, srcB source.Source
	f := newFixture(t, func(f *fixture, p source.Params) (err error) {
		if srcA, err = source.New(storeConfig("a", f.table, a), p); err != nil {
			return err
		}
		srcB, err = source.New(storeConfig("b", f.table, b), p)
		return err
	})
	f.start(time.Minute)
	wtxn := f.db.WriteTxn(f.table)
	f.table.Insert(wtxn, &obj{Key: "api1", Value: "x", Owner: "api"})
	wtxn.Commit()
	f.waitTable("both lists", func(txn statedb.ReadTxn) bool {
		init, _ := f.table.Initialized(txn)
		return init && f.table.NumObjects(txn) == 4
	})

	// b claims a key that a owns, and one the API owns: refused, reported.
	b.Set("a1", "from-b")
	b.Set("api1", "from-b")
	snap := waitStatus(t, srcB, "conflicts reported", func(s source.StatusSnapshot) bool { return s.FailingCount == 2 })
	if !contains(snap.HealthMessage(), "a1: "+source.ErrOwnedByOther.Error()) {
		t.Fatalf("health %q does not name the conflict", snap.HealthMessage())
	}

	// a's store empties; its relist deletes its rows and nothing else,
	// and b, which wants a1, writes it once a gave it up.
	a.Delete("a1")
	a.Delete("a2")
	a.Compact()
	srcA.Resync()
	f.waitTable("a's rows gone", func(txn statedb.ReadTxn) bool { return len(f.contents(txn, "a")) == 0 })
	b.Delete("b1")
	want := map[string]string{"api1": "x", "a1": "from-b"}
	f.waitTable("b1 gone", func(txn statedb.ReadTxn) bool { return mapsEqual(f.contents(txn, ""), want) })
	if got := srcA.Status(); got.Objects != 0 || got.Items != 0 {
		t.Fatalf("a still owns %d objects of %d items", got.Objects, got.Items)
	}
}

// One item becomes many objects; a change that drops some deletes them; a
// Transform error keeps the item's objects and is reported on its key
// until the item is fixed; a delete removes them all.
func TestTransformMany(t *testing.T) {
	st := sourcetest.NewStore[string]()
	st.Set("x", "3")
	f, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) {
		cfg.Transform = func(key, v string) ([]*obj, error) {
			n, err := strconv.Atoi(v)
			if err != nil {
				return nil, fmt.Errorf("line 1: %w", err)
			}
			var objs []*obj
			for i := range n {
				objs = append(objs, &obj{Key: fmt.Sprintf("%s/%d", key, i), Value: v, Owner: "s"})
			}
			return objs, nil
		}
	})
	keys := func(txn statedb.ReadTxn) string {
		var ks []string
		for o := range f.table.All(txn) {
			ks = append(ks, o.Key+"="+o.Value)
		}
		return fmt.Sprint(ks)
	}
	wait := func(want string) {
		t.Helper()
		f.waitTable(want, func(txn statedb.ReadTxn) bool { return keys(txn) == want })
	}
	wait("[x/0=3 x/1=3 x/2=3]")
	st.Set("x", "2")
	wait("[x/0=2 x/1=2]")

	st.Set("x", "two")
	snap := waitStatus(t, src, "x failing", func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
	if snap.Failing[0].Key != "x" || !contains(snap.Failing[0].Error, "line 1") || snap.Healthy() {
		t.Fatalf("status %+v: want x failing with its error", snap)
	}
	if got := keys(f.db.ReadTxn()); got != "[x/0=2 x/1=2]" {
		t.Fatalf("a failed transform changed the table: %s", got)
	}
	st.Set("x", "1")
	wait("[x/0=1]")
	waitStatus(t, src, "x fixed", func(s source.StatusSnapshot) bool { return s.Healthy() })
	st.Delete("x")
	wait("[]")
}

// A failing list degrades health with the error and the time since the
// last sync, and is retried until it succeeds.
func TestListErrorsDegradeHealth(t *testing.T) {
	st := sourcetest.NewStore[string]()
	st.Set("a", "1")
	var fail atomic.Int32
	fail.Store(3)
	st.ListErr = func() error {
		if fail.Add(-1) >= 0 {
			return errInjected
		}
		return nil
	}
	f, src := oneSource(t, st, nil)
	f.waitTable("list after retries", func(txn statedb.ReadTxn) bool { return f.table.NumObjects(txn) == 1 })
	s := waitStatus(t, src, "synced", func(s source.StatusSnapshot) bool { return s.Relists == 1 })
	if !s.Healthy() || s.LastError != "list: "+errInjected.Error() {
		t.Fatalf("after recovery: healthy=%v last error %q", s.Healthy(), s.LastError)
	}

	// Fail every list from now on; a resync then leaves it degraded.
	fail.Store(1 << 30)
	src.Resync()
	s = waitStatus(t, src, "degraded", func(s source.StatusSnapshot) bool { return !s.Healthy() })
	if msg := s.HealthMessage(); !contains(msg, "last sync") || !contains(msg, errInjected.Error()) {
		t.Fatalf("health message %q lacks the last sync or the error", msg)
	}
}

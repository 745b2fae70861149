package source_test

import (
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

// equalNoOwner is the kind of Equal docs/sources.md shows: it leaves the owner out.
func equalNoOwner(a, b *obj) bool { return a.Key == b.Key && a.Value == b.Value }

func (f *fixture) put(o *obj) {
	wtxn := f.db.WriteTxn(f.table)
	f.table.Insert(wtxn, o)
	wtxn.Commit()
}

func (f *fixture) row(key string) (*obj, bool) {
	o, _, found := f.table.Get(f.db.ReadTxn(), keyIndex.Query(key))
	return o, found
}

// Finding 11: a row the API took over, with Owns set, is neither
// rewritten when the source's item changes nor at a resync; the item is
// reported, naming the other writer.
func TestNoOverwriteOfTakenOverRow(t *testing.T) {
	st := sourcetest.NewStore[string]()
	st.Set("k", "1")
	f, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) {
		cfg.Owner = func(o *obj) string { return o.Owner }
	})
	f.waitTable("k", func(txn statedb.ReadTxn) bool { return len(f.contents(txn, "s")) == 1 })
	f.put(&obj{Key: "k", Value: "api", Owner: "api"})
	st.Set("k", "2")
	snap := waitStatus(t, src, "k reported", func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
	if msg := snap.Failing[0].Error; !contains(msg, source.ErrOwnedByOther.Error()) || !contains(msg, "written by api") {
		t.Fatalf("report %q", msg)
	}
	src.Resync()
	waitStatus(t, src, "resync", func(s source.StatusSnapshot) bool { return s.Relists >= 2 })
	if o, _ := f.row("k"); o.Owner != "api" || o.Value != "api" {
		t.Fatalf("row %+v: the source overwrote the API's row", o)
	}
	if s := src.Status(); s.Objects != 0 || s.Healthy() {
		t.Fatalf("status %+v: want 0 objects held and degraded", s)
	}
	// The API gives the row up: the source's object is written at once.
	wtxn := f.db.WriteTxn(f.table)
	f.table.Delete(wtxn, &obj{Key: "k"})
	wtxn.Commit()
	f.waitTable("k back", func(txn statedb.ReadTxn) bool { return f.contents(txn, "s")["k"] == "2" })
	waitStatus(t, src, "healthy", func(s source.StatusSnapshot) bool { return s.Healthy() && s.Objects == 1 })
}

// Finding 12 (first case): with an Equal that leaves the owner out, an API
// row equal to the item's object is still the API's: a change of the item
// does not overwrite it.
func TestEqualDoesNotAdopt(t *testing.T) {
	st := sourcetest.NewStore[string]()
	f, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) { cfg.Equal = equalNoOwner })
	f.waitTable("initialized", func(txn statedb.ReadTxn) bool { ok, _ := f.table.Initialized(txn); return ok })
	f.put(&obj{Key: "x", Value: "1", Owner: "api"})
	st.Set("x", "1")
	waitStatus(t, src, "x reported", func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
	st.Set("x", "2")
	st.Set("marker", "m")
	f.waitTable("marker", func(txn statedb.ReadTxn) bool { return len(f.contents(txn, "s")) == 1 })
	if o, _ := f.row("x"); o.Owner != "api" || o.Value != "1" {
		t.Fatalf("row %+v: the API's row was overwritten", o)
	}
}

// Finding 12 (second case) and 13: b does not adopt a's row, so when a's
// item goes and a deletes x, b writes its own x; and without Owns, a's
// relist does not delete the x that b overwrote.
func TestTwoSourcesOneKey(t *testing.T) {
	for _, owns := range []bool{true, false} {
		t.Run(map[bool]string{true: "owns", false: "no-owns"}[owns], func(t *testing.T) {
			a, b := sourcetest.NewStore[string](), sourcetest.NewStore[string]()
			a.Set("x", "1")
			var srcA, srcB source.Source
			f := newFixture(t, func(f *fixture, p source.Params) (err error) {
				ca, cb := storeConfig("a", f.table, a), storeConfig("b", f.table, b)
				ca.Equal, cb.Equal = equalNoOwner, equalNoOwner
				if !owns {
					ca.Owns, cb.Owns = nil, nil
				}
				if srcA, err = source.New(ca, p); err != nil {
					return err
				}
				srcB, err = source.New(cb, p)
				return err
			})
			f.start(time.Minute)
			f.waitTable("a's x", func(txn statedb.ReadTxn) bool { return f.contents(txn, "a")["x"] == "1" })
			if !owns {
				// Another writer (here the API) overwrites a's x.
				f.put(&obj{Key: "x", Value: "api", Owner: "api"})
				a.Delete("x")
				a.Set("marker", "m")
				f.waitTable("a's marker", func(txn statedb.ReadTxn) bool { return f.contents(txn, "a")["marker"] == "m" })
				if o, found := f.row("x"); !found || o.Owner != "api" {
					t.Fatalf("a deleted or rewrote the row another writer had: %+v %v", o, found)
				}
				waitStatus(t, srcA, "a holds only marker", func(s source.StatusSnapshot) bool { return s.Objects == 1 && s.Healthy() })
				return
			}
			b.Set("x", "1")
			waitStatus(t, srcB, "b reports x", func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
			a.Delete("x")
			f.waitTable("b's x", func(txn statedb.ReadTxn) bool { return f.contents(txn, "b")["x"] == "1" })
			waitStatus(t, srcB, "b healthy", func(s source.StatusSnapshot) bool { return s.Healthy() && s.Objects == 1 })
			waitStatus(t, srcA, "a empty", func(s source.StatusSnapshot) bool { return s.Objects == 0 })
		})
	}
}

// Finding 14 and item 3: two items yield X; the first by key is used and
// both are reported naming each other; no resync flaps; when one goes,
// the other's content is written.
func TestDuplicateAcrossItems(t *testing.T) {
	for _, drop := range []string{"a", "b"} {
		t.Run("drop-"+drop, func(t *testing.T) {
			st := sourcetest.NewStore[string]()
			st.Set("a", "1")
			st.Set("b", "2")
			var writes int
			f, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) {
				cfg.Transform = func(key, v string) ([]*obj, error) {
					return []*obj{{Key: "X", Value: v, Owner: "s"}}, nil
				}
				cfg.Pending = func(o *obj) *obj { writes++; return pending(o) }
			})
			snap := waitStatus(t, src, "both reported", func(s source.StatusSnapshot) bool { return s.FailingCount == 2 })
			if !contains(snap.Failing[0].Error, "also yielded by b") || !contains(snap.Failing[1].Error, "also yielded by a") ||
				!contains(snap.Failing[0].Error, source.ErrDuplicate.Error()) {
				t.Fatalf("reports %+v", snap.Failing)
			}
			for range 3 {
				n := src.Status().Relists
				src.Resync()
				waitStatus(t, src, "resync", func(s source.StatusSnapshot) bool { return s.Relists > n })
				if o, _ := f.row("X"); o.Value != "1" {
					t.Fatalf("X = %s, want a's 1", o.Value)
				}
			}
			if s := src.Status(); s.LastRelist.Upserts != 0 || s.Objects != 1 {
				t.Fatalf("status %+v: a resync rewrote X or counts disagree with the table", s)
			}
			st.Delete(drop)
			want := map[string]string{"a": "2", "b": "1"}[drop]
			f.waitTable("X from the other", func(txn statedb.ReadTxn) bool { return f.contents(txn, "")["X"] == want })
			waitStatus(t, src, "healthy", func(s source.StatusSnapshot) bool { return s.Healthy() && s.Objects == 1 })
		})
	}
}

// A primary key repeated within one item fails that item.
func TestDuplicateWithinItem(t *testing.T) {
	st := sourcetest.NewStore[string]()
	st.Set("a", "1")
	f, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) {
		cfg.Transform = func(key, v string) ([]*obj, error) {
			if v == "twice" {
				return []*obj{{Key: "X", Value: "1", Owner: "s"}, {Key: "X", Value: "2", Owner: "s"}}, nil
			}
			return []*obj{{Key: "X", Value: v, Owner: "s"}}, nil
		}
	})
	f.waitTable("X", func(txn statedb.ReadTxn) bool { return f.contents(txn, "")["X"] == "1" })
	st.Set("a", "twice")
	snap := waitStatus(t, src, "a fails", func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
	if !contains(snap.Failing[0].Error, "appears twice") {
		t.Fatalf("report %q", snap.Failing[0].Error)
	}
	if o, _ := f.row("X"); o.Value != "1" {
		t.Fatalf("X = %s: the failing item changed it", o.Value)
	}
}

// Finding 15: a relist that moves an unchanged object from one item to
// another writes nothing; its status stays as it was.
func TestMoveWritesNothing(t *testing.T) {
	st := sourcetest.NewStore[string]()
	st.Set("a", "X")
	var writes int
	f, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) {
		cfg.Transform = func(key, v string) ([]*obj, error) {
			return []*obj{{Key: v, Value: "same", Owner: "s"}}, nil
		}
		cfg.Pending = func(o *obj) *obj { writes++; return pending(o) }
	})
	f.waitTable("X", func(txn statedb.ReadTxn) bool { return f.contents(txn, "")["X"] == "same" })
	rev := f.table.Revision(f.db.ReadTxn())
	// Both changes arrive through one relist: the old item sorts first.
	st.Delete("a")
	st.Set("b", "X")
	st.Compact()
	src.Resync()
	waitStatus(t, src, "relisted", func(s source.StatusSnapshot) bool { return s.Relists >= 2 && s.Items == 1 })
	if got := f.table.Revision(f.db.ReadTxn()); got != rev || writes != 1 {
		t.Fatalf("the move wrote: revision %d -> %d, %d writes", rev, got, writes)
	}
}

// Finding 17: a duplicate source name without source.Cell is an
// ErrInvalidConfig, and leaves no write transaction open.
func TestDuplicateNameWithoutCell(t *testing.T) {
	st := sourcetest.NewStore[string]()
	var errDup error
	f := newFixture(t, func(f *fixture, p source.Params) error {
		p.Registry = nil
		if _, err := source.New(storeConfig("s", f.table, st), p); err != nil {
			return err
		}
		_, errDup = source.New(storeConfig("s", f.table, st), p)
		return nil
	})
	f.start(time.Minute)
	if !errorsIs(errDup, source.ErrInvalidConfig) {
		t.Fatalf("second source: %v, want ErrInvalidConfig", errDup)
	}
	f.put(&obj{Key: "free", Value: "1"}) // would block on an open write transaction
}

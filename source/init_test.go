package source_test

import (
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

func (f *fixture) initialized() bool {
	ok, _ := f.table.Initialized(f.db.ReadTxn())
	return ok
}

// Finding 1, in the source layer: a first list with an item that fails
// (as after a restart with a bad manifest) does not initialize the table,
// so a reconciler does not prune what that item yielded before; the good
// items are written at once; health names what blocks. Once the item
// reads, the table is initialized, by a commit (the watch) or a relist.
func TestFailingItemBlocksInitialization(t *testing.T) {
	for _, via := range []string{"watch", "relist", "delete"} {
		t.Run(via, func(t *testing.T) {
			st := sourcetest.NewStore[string]()
			st.Set("db", "bad: [5432")
			st.Set("web", "1")
			f, src := oneSource(t, st, nil)
			f.waitTable("web", func(txn statedb.ReadTxn) bool { return f.contents(txn, "")["web"] == "1" })
			snap := waitStatus(t, src, "listed", func(s source.StatusSnapshot) bool { return s.Relists == 1 })
			if f.initialized() || snap.Initialized || snap.NeverRead != 1 || snap.Healthy() {
				t.Fatalf("initialized with a failing item: %+v", snap)
			}
			msg := snap.HealthMessage()
			if !contains(msg, "table not initialized") || !contains(msg, `db: value "bad: [5432" is bad`) {
				t.Fatalf("health %q does not name what blocks initialization", msg)
			}
			switch via {
			case "watch":
				st.Set("db", "1")
			case "relist":
				st.Set("db", "1")
				st.Compact()
				src.Resync()
			case "delete":
				st.Delete("db")
			}
			f.waitTable("initialized", func(txn statedb.ReadTxn) bool { ok, _ := f.table.Initialized(txn); return ok })
			waitStatus(t, src, "healthy", func(s source.StatusSnapshot) bool { return s.Healthy() && s.Initialized && s.InitForced == "" })
		})
	}
}

// An item that fails after it was read once does not block anything: its
// objects are in the table.
func TestLaterFailureDoesNotBlock(t *testing.T) {
	st := sourcetest.NewStore[string]()
	st.Set("db", "1")
	f, src := oneSource(t, st, nil)
	f.waitTable("initialized", func(txn statedb.ReadTxn) bool { ok, _ := f.table.Initialized(txn); return ok })
	st.Set("db", "bad")
	snap := waitStatus(t, src, "db failing", func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
	if snap.NeverRead != 0 || !snap.Initialized || f.contents(f.db.ReadTxn(), "")["db"] != "1" {
		t.Fatalf("status %+v, table %v", snap, f.contents(f.db.ReadTxn(), ""))
	}
}

// The explicit ways on: Config.InitTimeout and Source.InitializeAnyway
// initialize the table with a warning in Status.
func TestInitializeAnyway(t *testing.T) {
	for _, how := range []string{"timeout", "call"} {
		t.Run(how, func(t *testing.T) {
			st := sourcetest.NewStore[string]()
			st.Set("db", "bad")
			f, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) {
				if how == "timeout" {
					cfg.InitTimeout = 10 * time.Millisecond
				}
			})
			if how == "call" {
				waitStatus(t, src, "listed", func(s source.StatusSnapshot) bool { return s.Relists == 1 })
				if f.initialized() {
					t.Fatal("initialized before the call")
				}
				src.InitializeAnyway()
			}
			f.waitTable("initialized", func(txn statedb.ReadTxn) bool { ok, _ := f.table.Initialized(txn); return ok })
			snap := waitStatus(t, src, "forced", func(s source.StatusSnapshot) bool { return s.Initialized })
			if snap.InitForced == "" || snap.Healthy() || snap.FailingCount != 1 {
				t.Fatalf("status %+v: want the forced initialization recorded, db still failing", snap)
			}
		})
	}
}

// Item 4: with StaleAfter, a source whose store is silent for longer is
// Degraded with the time since the last contact, and OK again at the
// next contact (here an event; etcd's progress notifications are
// Bookmarks).
func TestStaleAfter(t *testing.T) {
	st := sourcetest.NewStore[string]()
	st.Set("a", "1")
	_, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) { cfg.StaleAfter = 300 * time.Millisecond })
	s := waitStatus(t, src, "stale", func(s source.StatusSnapshot) bool { return s.Stale() })
	if msg := s.HealthMessage(); s.Healthy() || !contains(msg, "no contact with the store for") || !contains(msg, "bound 300ms") {
		t.Fatalf("health %q", msg)
	}
	st.Set("b", "1")
	waitStatus(t, src, "fresh", func(s source.StatusSnapshot) bool { return s.Objects == 2 && !s.Stale() && s.Healthy() })
}

package statedbcompat_test

import (
	"errors"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	sdbreconciler "github.com/cilium/statedb/reconciler"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/reconciler/statedbcompat"
)

// sdbKinds and kinds are the five kinds of each side, in the same order.
var (
	sdbKinds = []sdbreconciler.StatusKind{
		sdbreconciler.StatusKindPending, sdbreconciler.StatusKindRefreshing, sdbreconciler.StatusKindDone,
		sdbreconciler.StatusKindError, sdbreconciler.StatusKindUnset,
	}
	kinds = []reconciler.StatusKind{
		reconciler.StatusKindPending, reconciler.StatusKindRefreshing, reconciler.StatusKindDone,
		reconciler.StatusKindError, reconciler.StatusKindUnset,
	}
)

// sameSdbStatus compares statedb statuses field by field, Error by the
// message it points at (and whether it is nil).
func sameSdbStatus(a, b sdbreconciler.Status) bool {
	return a.Kind == b.Kind && a.UpdatedAt == b.UpdatedAt && a.ID == b.ID &&
		(a.Error == nil) == (b.Error == nil) && a.GetError() == b.GetError()
}

// checkRoundTrips fails t unless cs survives converge -> statedb ->
// converge and ss survives statedb -> converge -> statedb exactly.
func checkRoundTrips(t *testing.T, cs reconciler.Status, ss sdbreconciler.Status) {
	t.Helper()
	if got := statedbcompat.StatusFromStatedb(statedbcompat.StatusToStatedb(cs)); got != cs {
		t.Errorf("converge %+v came back as %+v", cs, got)
	}
	if got := statedbcompat.StatusToStatedb(statedbcompat.StatusFromStatedb(ss)); !sameSdbStatus(got, ss) {
		t.Errorf("statedb %+v (error %q) came back as %+v (error %q)", ss, ss.GetError(), got, got.GetError())
	}
}

// FuzzStatusRoundTrip: every valid converge status, and every statedb
// status whose Error is set for the Error kind (and, for other kinds, set
// only to a message), converts to the other side and back unchanged. The
// seeds run as an ordinary test.
func FuzzStatusRoundTrip(f *testing.F) {
	f.Add(uint8(0), int64(0), "", false, uint64(0))
	f.Add(uint8(1), int64(1e18), "", false, uint64(7))
	f.Add(uint8(2), int64(-1), "stale", true, uint64(1<<64-1))
	f.Add(uint8(3), int64(1700000000123456789), "", true, uint64(3))
	f.Add(uint8(3), int64(42), "boom\nline", true, uint64(0))
	f.Add(uint8(4), int64(0), "", false, uint64(0))
	f.Add(uint8(4), int64(5), "why", true, uint64(9))
	f.Fuzz(func(t *testing.T, kind uint8, nanos int64, msg string, hasMsg bool, id uint64) {
		var at time.Time
		if nanos != 0 {
			at = time.Unix(0, nanos)
		}
		i := int(kind) % len(kinds)
		cs := reconciler.Status{Kind: kinds[i], UpdatedAt: at, ID: id}
		ss := sdbreconciler.Status{Kind: sdbKinds[i], UpdatedAt: at, ID: id}
		if hasMsg {
			cs.Error = msg
		}
		if sdbKinds[i] == sdbreconciler.StatusKindError || hasMsg && msg != "" {
			m := msg
			ss.Error = &m
		}
		checkRoundTrips(t, cs, ss)
		if got := statedbcompat.StatusKindFromStatedb(sdbKinds[i]); got != kinds[i] {
			t.Errorf("kind %q converts to %s, want %s", sdbKinds[i], got, kinds[i])
		}
	})
}

// TestStatusConstructorsRoundTrip: what each side's constructors make
// converts to the kind of the same name and back unchanged (statedb's
// Done and Error keep their IDs; an Error always has a message pointer).
func TestStatusConstructorsRoundTrip(t *testing.T) {
	sdbSide := []struct {
		s    sdbreconciler.Status
		want reconciler.StatusKind
	}{
		{sdbreconciler.StatusPending(), reconciler.StatusKindPending},
		{sdbreconciler.StatusRefreshing(), reconciler.StatusKindRefreshing},
		{sdbreconciler.StatusDone(), reconciler.StatusKindDone},
		{sdbreconciler.StatusError(errors.New("boom")), reconciler.StatusKindError},
		{sdbreconciler.StatusError(nil), reconciler.StatusKindError},
		{sdbreconciler.Status{}, reconciler.StatusKindUnset},
	}
	for _, c := range sdbSide {
		cs := statedbcompat.StatusFromStatedb(c.s)
		if cs.Kind != c.want || cs.ID != c.s.ID || cs.Error != c.s.GetError() || cs.UpdatedAt != c.s.UpdatedAt {
			t.Errorf("statedb %+v converts to %+v", c.s, cs)
		}
		checkRoundTrips(t, cs, c.s)
	}
	for _, cs := range []reconciler.Status{
		reconciler.StatusPending(), reconciler.StatusRefreshing(), reconciler.StatusDone(),
		reconciler.StatusError(errors.New("boom")), reconciler.StatusError(nil), reconciler.StatusUnset(), {},
	} {
		ss := statedbcompat.StatusToStatedb(cs)
		if ss.Kind.String() != cs.Kind.String() && cs.Kind != reconciler.StatusKindUnset {
			t.Errorf("converge %s converts to statedb %q", cs.Kind, ss.Kind)
		}
		if (cs.Kind == reconciler.StatusKindError) != (ss.Error != nil) {
			t.Errorf("converge %+v converts to Error pointer %v: want one exactly for the Error kind", cs, ss.Error)
		}
		checkRoundTrips(t, cs, ss)
	}
	if got := statedbcompat.StatusToStatedb(reconciler.StatusUnset()).Kind; got != sdbreconciler.StatusKindUnset {
		t.Errorf("converge Unset converts to statedb %q, want Unset", got)
	}
	// A corrupt kind is reconciled by converge's engine: Pending.
	if got := statedbcompat.StatusKindToStatedb(reconciler.StatusKind(9)); got != sdbreconciler.StatusKindPending {
		t.Errorf("an invalid kind converts to %q, want Pending", got)
	}
}

// TestStatusSetHelpers: a converge reconciler reads and writes its name
// of a statedb StatusSet through GetFromSet and SetInSet. Another
// reconciler's write leaves its request as it was (the same ID: converge
// takes it for a status write, not a new request), Pending() makes a new
// one, and statedb's IsDone and GetError read what converge wrote.
func TestStatusSetHelpers(t *testing.T) {
	set := sdbreconciler.NewStatusSet().Pending("a", "b")
	asked := statedbcompat.GetFromSet(set, "b")
	if asked.Kind != reconciler.StatusKindPending || asked.ID == 0 {
		t.Fatalf("b in a new set is %+v, want Pending with the set's ID", asked)
	}
	afterA := set.Set("a", sdbreconciler.StatusDone())
	if got := statedbcompat.GetFromSet(afterA, "b"); got != asked {
		t.Errorf("b after a's Done is %+v, want its request unchanged %+v", got, asked)
	}
	if got := statedbcompat.GetFromSet(afterA.Pending(), "b"); got.Kind != reconciler.StatusKindPending || got.ID == asked.ID {
		t.Errorf("b after Pending() is %+v, want a new request", got)
	}

	// A name the set does not hold: Pending with the set's ID, the same
	// after another name's write.
	bare := sdbreconciler.NewStatusSet().Pending()
	absent := statedbcompat.GetFromSet(bare, "c")
	if absent.Kind != reconciler.StatusKindPending || absent.ID == 0 {
		t.Fatalf("an absent name is %+v, want Pending with the set's ID", absent)
	}
	if got := statedbcompat.GetFromSet(bare.Set("a", sdbreconciler.StatusDone()), "c"); got != absent {
		t.Errorf("an absent name after another's write is %+v, want %+v", got, absent)
	}

	failed := statedbcompat.SetInSet(afterA, "b", reconciler.StatusError(errors.New("boom")))
	if st := failed.Get("b"); st.Kind != sdbreconciler.StatusKindError || st.GetError() != "boom" || failed.IsDone() {
		t.Errorf("b written Error reads in statedb as %+v (%q), IsDone %v", st, st.GetError(), failed.IsDone())
	}
	done := statedbcompat.SetInSet(failed, "b", reconciler.StatusDone())
	if !done.IsDone() || done.IsPendingOrRefreshing() {
		t.Errorf("a and b Done: statedb's IsDone %v, IsPendingOrRefreshing %v", done.IsDone(), done.IsPendingOrRefreshing())
	}
	unset := statedbcompat.SetInSet(done, "b", reconciler.StatusUnset())
	if st := unset.Get("b"); st.Kind != sdbreconciler.StatusKindUnset || unset.IsDone() {
		t.Errorf("b written Unset reads in statedb as %q, IsDone %v", st.Kind, unset.IsDone())
	}
	if afterA.Get("b").Kind != sdbreconciler.StatusKindPending {
		t.Errorf("SetInSet changed the set it was given")
	}
}

// TestStatusSetHelpersPassTheOwnershipProbe: converge's New probes that
// two reconcilers on a table do not read and write the same status, by
// writing a status through one's SetObjectStatus and reading it through
// the other's GetObjectStatus. Through GetFromSet and SetInSet the probe
// status survives (its ID and message are kept), so two converge
// reconcilers given the same entry of a statedb StatusSet are refused,
// and two given their own entries are not.
func TestStatusSetHelpersPassTheOwnershipProbe(t *testing.T) {
	for _, c := range []struct {
		entry   string
		refused bool
	}{{"b", true}, {"c", false}} {
		var second error
		h := hive.New(
			statedb.Cell, job.Cell, reconciler.Cell,
			cell.Provide(cell.NewSimpleHealth),
			cell.Module("probe", "Probe",
				cell.Provide(job.Registry.NewGroup),
				cell.Invoke(func(db *statedb.DB, p reconciler.Params) error {
					table, err := statedb.NewTable(db, "nodes", nodeID)
					if err != nil {
						return err
					}
					config := func(name, entry string) reconciler.Config[*node] {
						return statedbcompat.Config(table, cloneNode,
							func(n *node, s reconciler.Status) *node {
								n.Statuses = statedbcompat.SetInSet(n.Statuses, entry, s)
								return n
							},
							func(n *node) reconciler.Status { return statedbcompat.GetFromSet(n.Statuses, entry) },
							newMemTarget(), nil, statedbcompat.WithName(name))
					}
					if _, err := reconciler.New(config("b", "b"), p); err != nil {
						return err
					}
					_, second = reconciler.New(config("other", c.entry), p)
					return nil
				}),
			),
		)
		if err := h.Populate(hivetest.Logger(t)); err != nil {
			t.Fatal(err)
		}
		if refused := errors.Is(second, reconciler.ErrInvalidConfig); refused != c.refused {
			t.Errorf("a second reconciler on entry %q: New returned %v, want refused %v", c.entry, second, c.refused)
		}
	}
}

package reconciler

import (
	"testing"
	"time"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
)

// TestDecideUnsetWithdraws: decide, the rule both loops read changes by,
// withdraws whatever a key has outstanding when its object turns Unset,
// in every state a request can be in, and counts the key Unset: no
// request, no failure, no retry, no kind counted. A running attempt keeps
// the key busy, its result unwanted.
func TestDecideUnsetWithdraws(t *testing.T) {
	now := time.Now()
	pending := Status{Kind: StatusKindPending, ID: 7}
	ch := func(rev statedb.Revision) change[int] { return change[int]{obj: 1, rev: rev} }
	states := map[string]func(tb *requests[int], r *request[int]){
		"queued":   func(*requests[int], *request[int]) {},
		"retrying": func(tb *requests[int], r *request[int]) { tb.retry(r, now.Add(time.Second), whyBackoff, "boom", now) },
		"held":     func(tb *requests[int], r *request[int]) { tb.hold(r, whyPermanent, "boom", now.Add(time.Hour), now) },
		"running": func(tb *requests[int], r *request[int]) {
			if taken := takeReady(tb, nil, 0, now); len(taken) != 1 {
				t.Fatalf("take = %v", taken)
			}
		},
		"failed delete": func(tb *requests[int], r *request[int]) {
			tb.add("k", change[int]{obj: 1, rev: 9, deleted: true}, Status{}, 9, now)
			tb.retry(tb.rows["k"], now.Add(time.Second), whyBackoff, "delete: boom", now)
		},
	}
	for name, enter := range states {
		t.Run(name, func(t *testing.T) {
			tb := newTestTable(true)
			r := tb.add("k", ch(10), pending, 10, now)
			enter(tb, r)
			attempt := r.attempt
			if tb.decide("k", ch(11), StatusUnset(), 11, 0, now) {
				t.Fatal("decide queued a request for an Unset object")
			}
			if got := tb.rows["k"]; got == nil || got.state != stUnset || got.detail != nil {
				t.Fatalf("the key's row is %+v, want a bare Unset row", got)
			}
			if tb.failing != 0 || tb.failingDeletes != 0 || tb.byDue.Len() != 0 || tb.refreshQ.Len() != 0 ||
				len(tb.active) != 0 || tb.kinds != ([statusKindCount]int{}) {
				t.Errorf("counts after Unset: failing %d, retries %d, refreshes %d, active %d, kinds %v; want none",
					tb.failing, tb.byDue.Len(), tb.refreshQ.Len(), len(tb.active), tb.kinds)
			}
			if tb.n[stUnset] != 1 {
				t.Errorf("%d Unset rows, want k counted Unset", tb.n[stUnset])
			}
			if attempt != 0 && tb.returned(r, attempt, now) {
				t.Errorf("the running attempt's result is still wanted")
			}
			checkTable(t, tb, 0)
			// Pending again: a request, and no longer counted Unset.
			if !tb.decide("k", ch(12), Status{Kind: StatusKindPending, ID: 8}, 12, 0, now) || tb.n[stUnset] != 0 {
				t.Errorf("Pending after Unset: no request, or still counted Unset (%d)", tb.n[stUnset])
			}
			checkTable(t, tb, 1)
		})
	}
}

// wobj is an object for writeStatus: a key and a status.
type wobj struct {
	ID     string
	Status Status
}

func (o *wobj) TableHeader() []string { return []string{"ID", "Status"} }
func (o *wobj) TableRow() []string    { return []string{o.ID, o.Status.Kind.String()} }

// TestWriteStatusUnsetSupersedes: a result judged before the change that
// made its object Unset is read is not written, and its request settles
// (writeSuperseded), as for a newer request: not owed and run again.
func TestWriteStatusUnsetSupersedes(t *testing.T) {
	db := statedb.New()
	table, err := statedb.NewTable(db, "w", statedb.Index[*wobj, string]{
		Name:       "id",
		FromObject: func(o *wobj) index.KeySet { return index.NewKeySet(index.String(o.ID)) },
		FromKey:    index.String,
		Unique:     true,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &committer[*wobj]{reconciler: &reconciler[*wobj]{
		cfg: Config[*wobj]{
			Table:           table,
			GetObjectStatus: func(o *wobj) Status { return o.Status },
			SetObjectStatus: func(o *wobj, s Status) *wobj { o.Status = s; return o },
			CloneObject:     func(o *wobj) *wobj { c := *o; return &c },
		},
		db:             db,
		primary:        table.PrimaryIndexer(),
		pointerObjects: true,
	}}
	put := func(o *wobj) statedb.Revision {
		wtxn := db.WriteTxn(table)
		if _, _, err := table.Insert(wtxn, o); err != nil {
			t.Fatal(err)
		}
		return table.Revision(wtxn.Commit())
	}
	asked := StatusPending()
	seen := &wobj{ID: "x", Status: asked}
	rev := put(seen)
	put(&wobj{ID: "x", Status: StatusUnset()})

	w := statusWrite[*wobj]{key: "x", obj: seen, rev: rev, target: &wobj{ID: "x", Status: asked}, expect: asked, status: StatusDone()}
	wtxn := db.WriteTxn(table)
	outcome := r.writeStatus(wtxn, &w)
	wtxn.Commit()
	if outcome != writeSuperseded {
		t.Errorf("outcome %d, want writeSuperseded (%d)", outcome, writeSuperseded)
	}
	if cur, _, _ := table.Get(db.ReadTxn(), r.queryOf(seen)); cur.Status.Kind != StatusKindUnset {
		t.Errorf("x is %s after the write, want Unset", cur.Status.Kind)
	}
}

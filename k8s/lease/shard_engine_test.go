package lease_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/internal/slots"
	"github.com/converge-go/converge/k8s/lease"
	"github.com/converge-go/converge/reconciler"
)

// slotOp is one Update a sharded replica ran.
type slotOp struct {
	replica, key string
	slot         int
	token        lease.Token
	start, end   time.Time
}

// slotTarget records the Updates of every replica; each takes its
// latency, or until its context ends.
type slotTarget struct {
	mu      sync.Mutex
	keepOps bool     // record each op, not only count them
	ops     []slotOp // with keepOps
	updates int
	changed chan struct{} // closed at every op
}

func newSlotTarget() *slotTarget { return &slotTarget{keepOps: true, changed: make(chan struct{})} }

// wait waits until cond holds of the ops recorded.
func (tg *slotTarget) wait(t testing.TB, what string, cond func([]slotOp) bool) {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		tg.mu.Lock()
		ok, ch := cond(tg.ops), tg.changed
		tg.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("never: %s", what)
		}
	}
}

type slotOps struct {
	name    string
	tg      *slotTarget
	latency time.Duration // of the remote call; 0: a millisecond
}

func (o slotOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *row) error {
	tok, _ := lease.TokenFrom(ctx)
	began := time.Now()
	latency := o.latency
	if latency == 0 {
		latency = time.Millisecond
	}
	select {
	case <-time.After(latency): // a remote call
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	o.tg.mu.Lock()
	defer o.tg.mu.Unlock()
	o.tg.updates++
	if o.tg.keepOps {
		o.tg.ops = append(o.tg.ops, slotOp{replica: o.name, key: r.Key, slot: slots.Of([]byte(r.Key), testSlots), token: tok, start: began, end: time.Now()})
	}
	close(o.tg.changed)
	o.tg.changed = make(chan struct{})
	return nil
}

func (slotOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *row) error { return nil }
func (slotOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*row, statedb.Revision]) error {
	return nil
}

// shardedEngine is a hive with a table and a reconciler whose Ownership
// is a sharder.
type shardedEngine struct {
	*member
	db    *statedb.DB
	table statedb.RWTable[*row]
}

func startShardedEngine(t testing.TB, m *member, tg *slotTarget) *shardedEngine {
	return startShardedEngineWith(t, m, slotOps{name: m.id, tg: tg})
}

// startShardedEngineWith is startShardedEngine with ops of the caller's.
func startShardedEngineWith(t testing.TB, m *member, ops slotOps) *shardedEngine {
	t.Helper()
	e := &shardedEngine{member: m}
	log := hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))
	h := hive.New(statedb.Cell, job.Cell, cell.Provide(cell.NewSimpleHealth),
		cell.Module("replica", "Replica",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, rp reconciler.Params) (err error) {
				e.db = db
				if e.table, err = statedb.NewTable(db, "rows", rowKey); err != nil {
					return err
				}
				return reconciler.Register(reconciler.Config[*row]{
					Table:                      e.table,
					GetObjectStatus:            func(o *row) reconciler.Status { return o.Status },
					SetObjectStatus:            func(o *row, s reconciler.Status) *row { o.Status = s; return o },
					CloneObject:                func(o *row) *row { c := *o; return &c },
					Operations:                 ops,
					Ownership:                  m.s,
					Concurrency:                4,
					FullReconciliationInterval: reconciler.Off,
					RefreshInterval:            reconciler.Off,
				}, rp)
			})))
	if err := h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return e
}

func (e *shardedEngine) insert(t testing.TB, keys []string) {
	t.Helper()
	wtxn := e.db.WriteTxn(e.table)
	for _, k := range keys {
		if _, _, err := e.table.Insert(wtxn, &row{Key: k, Status: reconciler.StatusPending()}); err != nil {
			t.Fatal(err)
		}
	}
	wtxn.Commit()
}

// updatedBy reports whether every key of keys has an op by the replica
// owner(slot) gives, started at or after since.
func updatedBy(keys []string, since time.Time, owner func(slot int) string) func([]slotOp) bool {
	return func(ops []slotOp) bool {
		done := map[string]bool{}
		for _, o := range ops {
			if !o.start.Before(since) && o.replica == owner(o.slot) {
				done[o.key] = true
			}
		}
		for _, k := range keys {
			if !done[k] {
				return false
			}
		}
		return true
	}
}

// Three replicas whose reconcilers' Ownership is a Sharder, fed the same
// desired objects: each key is updated by the replica its slot is
// assigned to, under that slot's token; when one replica is cut off from
// the API server, its keys are updated again by the others. No operation
// starts outside its replica's ownership of the key's slot, and no two
// replicas' operations on one slot overlap.
func TestShardEngine(t *testing.T) {
	group := newLeaseName(t)
	tg := newSlotTarget()
	link := srv.NewLink()
	a := startShardedEngine(t, startMember(t, srv.Config(), group, "a"), tg)
	b := startShardedEngine(t, startMember(t, srv.Config(), group, "b"), tg)
	c := startShardedEngine(t, startMember(t, link.Config(), group, "c"), tg)
	engines := []*shardedEngine{a, b, c}
	members := []*member{a.member, b.member, c.member}
	waitOwners(t, members, assigned([]string{"a", "b", "c"}))

	var keys []string
	for i := range 48 {
		keys = append(keys, fmt.Sprintf("key-%d", i))
	}
	start := time.Now()
	for _, e := range engines {
		e.insert(t, keys)
	}
	tg.wait(t, "every key updated by its slot's owner", updatedBy(keys, start, func(s int) string {
		return slots.Assign(s, []string{"a", "b", "c"})
	}))

	link.Blackhole()
	cut := time.Now()
	var cKeys []string
	for _, k := range keys {
		if slots.Assign(slots.Of([]byte(k), testSlots), []string{"a", "b", "c"}) == "c" {
			cKeys = append(cKeys, k)
		}
	}
	tg.wait(t, "the cut-off replica's keys updated by the others", updatedBy(cKeys, cut, func(s int) string {
		return slots.Assign(s, []string{"a", "b"})
	}))
	link.Restore()
	for _, m := range members {
		m.halt() // stop ownership before reading the spans
	}
	checkNoOverlap(t, members)
	checkOpsOwned(t, tg, members, group)
}

// checkOpsOwned fails the test for an operation that started outside its
// replica's ownership of the key's slot, under another token than its
// slot's, or beside another replica's operation on the same slot.
func checkOpsOwned(t *testing.T, tg *slotTarget, ms []*member, group string) {
	t.Helper()
	spans := map[string][]lease.OwnedSpan{}
	for _, m := range ms {
		spans[m.id] = m.s.Spans()
	}
	tg.mu.Lock()
	defer tg.mu.Unlock()
	for i, o := range tg.ops {
		if want := fmt.Sprintf("lease-test/%s-s-%d", group, o.slot); o.token.Lease != want || o.token.Holder != o.replica {
			t.Errorf("op %+v under token %v, want the slot's %s held by %s", o, o.token, want, o.replica)
		}
		within := false
		for _, sp := range spans[o.replica] {
			if sp.Slot == o.slot && !o.start.Before(sp.Start) && (sp.End.IsZero() || o.start.Before(sp.End)) {
				within = true
			}
		}
		if !within {
			t.Errorf("op %+v started while %s did not own slot %d", o, o.replica, o.slot)
		}
		for _, p := range tg.ops[i+1:] {
			if p.slot == o.slot && p.replica != o.replica && p.start.Before(o.end) && o.start.Before(p.end) {
				t.Errorf("ops on slot %d overlap: %+v and %+v", o.slot, o, p)
			}
		}
	}
}

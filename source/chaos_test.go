package source_test

import (
	"context"
	"fmt"
	"iter"
	"maps"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

// chaosSeed returns the seed of a randomized test: CONVERGE_SOURCE_SEED
// when set (to replay a failure), else a fresh one. It is logged either
// way.
func chaosSeed(t *testing.T) uint64 {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CONVERGE_SOURCE_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CONVERGE_SOURCE_SEED: %s", err)
		}
	}
	t.Logf("seed %d (replay with CONVERGE_SOURCE_SEED=%d)", seed, seed)
	return seed
}

// TestChaos drives a source, with a reconciler behind it, over a store
// that randomly disconnects, expires resume points, overflows, duplicates
// events, fails lists and delivers events from watches that have ended,
// while the store changes at random and is compacted. Throughout, no
// write is a no-op, no row is written more often than its content
// changed, and none is reconciled more often than it was written. Once
// the faults stop, the table equals the store, a resync writes nothing
// and reconciles nothing, and every further change is written and
// reconciled exactly once.
// faultyStore returns a store whose watches and lists fail at random
// (seeded) while the returned flag is set; it starts set.
func faultyStore(seed uint64) (*sourcetest.Store[string], *atomic.Bool) {
	var mu sync.Mutex
	frng := rand.New(rand.NewPCG(seed, 1))
	roll := func() float64 { mu.Lock(); defer mu.Unlock(); return frng.Float64() }
	st := sourcetest.NewStore[string]()
	faulty := new(atomic.Bool)
	faulty.Store(true)
	st.Faults = func(source.Event[string]) sourcetest.Fault {
		if !faulty.Load() {
			return sourcetest.None
		}
		switch r := roll(); {
		case r < 0.02:
			return sourcetest.Disconnect
		case r < 0.03:
			return sourcetest.Expire
		case r < 0.04:
			return sourcetest.Overflow
		case r < 0.05:
			return sourcetest.Stale
		case r < 0.10:
			return sourcetest.Duplicate
		}
		return sourcetest.None
	}
	st.ListErr = func() error {
		if faulty.Load() && roll() < 0.1 {
			return errInjected
		}
		return nil
	}
	return st, faulty
}

func TestChaos(t *testing.T) {
	seed := chaosSeed(t)
	st, faulty := faultyStore(seed)

	var (
		wmu    sync.Mutex
		writes = map[string]int{}
		noops  []string
		src    source.Source
		rec    reconciler.Reconciler[*obj]
		ops    = &countingOps{updates: map[string]int{}}
	)
	f := newFixture(t, func(f *fixture, p source.Params) (err error) {
		cfg := storeConfig("s", f.table, st)
		cfg.BufferSize = 8
		cfg.Resync = 20 * time.Millisecond
		cfg.Pending = func(o *obj) *obj {
			// Called for every row written, inside the write transaction:
			// the last committed row must differ.
			cur, _, found := f.table.Get(f.db.ReadTxn(), keyIndex.Query(o.Key))
			wmu.Lock()
			writes[o.Key]++
			if found && equal(cur, o) {
				noops = append(noops, o.Key)
			}
			wmu.Unlock()
			return pending(o)
		}
		if src, err = source.New(cfg, p); err != nil {
			return err
		}
		rec, err = reconciler.New(reconciler.Config[*obj]{
			Table:                      f.table,
			GetObjectStatus:            func(o *obj) reconciler.Status { return o.Status },
			SetObjectStatus:            func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
			CloneObject:                func(o *obj) *obj { c := *o; return &c },
			Operations:                 ops,
			FullReconciliationInterval: reconciler.Off,
			RefreshInterval:            reconciler.Off,
		}, f.rp)
		return err
	})
	f.start(time.Minute)
	settle := func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(f.ctx, 20*time.Second)
		defer cancel()
		if err := rec.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
			t.Fatal(err)
		}
	}

	model, changes := randomChanges(f, st, seed)
	faulty.Store(false)
	f.waitTable("table equal to the store", func(txn statedb.ReadTxn) bool { return mapsEqual(f.contents(txn, ""), model) })

	wmu.Lock()
	if len(noops) > 0 {
		t.Errorf("%d no-op writes, first %q", len(noops), noops[0])
	}
	for key, n := range writes {
		if n > changes[key] {
			t.Errorf("%s written %d times, its content changed %d times", key, n, changes[key])
		}
	}
	wmu.Unlock()
	settle()
	updates := ops.snapshot()
	wmu.Lock()
	for key, n := range updates {
		if w := writes[key]; n > w {
			t.Errorf("%s reconciled %d times, written %d times", key, n, w)
		}
	}
	wmu.Unlock()

	// Quiet: a resync writes nothing.
	rev := f.table.Revision(f.db.ReadTxn())
	before := src.Status().Relists
	src.Resync()
	waitStatus(t, src, "resync", func(s source.StatusSnapshot) bool { return s.Relists > before })
	if got := f.table.Revision(f.db.ReadTxn()); got != rev {
		t.Errorf("a resync of an unchanged store moved the table from revision %d to %d", rev, got)
	}
	settle()
	if got := ops.snapshot(); !maps.Equal(got, updates) {
		t.Errorf("a resync of an unchanged store caused reconciliations: %v, then %v", updates, got)
	}

	// Every change from now on is written exactly once.
	wmu.Lock()
	total := 0
	for _, n := range writes {
		total += n
	}
	wmu.Unlock()
	for i := range 20 {
		key, v := fmt.Sprintf("k%02d", i), "new"+strconv.Itoa(i)
		st.Set(key, v)
		model[key] = v
		f.waitTable(key, func(txn statedb.ReadTxn) bool { return mapsEqual(f.contents(txn, ""), model) })
		settle()
		if got, want := ops.snapshot()[key], updates[key]+1; got != want {
			t.Errorf("%s: one change reconciled %d times", key, got-updates[key])
		}
	}
	wmu.Lock()
	after := 0
	for _, n := range writes {
		after += n
	}
	wmu.Unlock()
	if after-total != 20 {
		t.Errorf("20 changes took %d writes", after-total)
	}
	if n := st.StaleAccepted(); n != 0 {
		t.Errorf("the source accepted %d events from watches that had ended", n)
	}
	s := src.Status()
	t.Logf("relists %d, events %d, commits %d, upserts %d, deletes %d", s.Relists, s.Events, s.Commits, s.Upserts, s.Deletes)
	if s.Relists < 5 {
		t.Errorf("only %d relists: the faults did not bite", s.Relists)
	}
}

// randomChanges changes the store at random (seeded): sets (often to the
// value a key already has, which is no change), deletes and compactions,
// letting the source catch up every 50. It returns the store's content
// and, per key, how often its content really changed.
func randomChanges(f *fixture, st *sourcetest.Store[string], seed uint64) (model map[string]string, changes map[string]int) {
	rng := rand.New(rand.NewPCG(seed, 2))
	changes = map[string]int{}
	model = map[string]string{}
	for i := range 3000 {
		key := fmt.Sprintf("k%02d", rng.IntN(60))
		switch r := rng.IntN(100); {
		case r < 70:
			v := strconv.Itoa(rng.IntN(4))
			if old, ok := model[key]; !ok || old != v {
				changes[key]++
			}
			model[key] = v
			st.Set(key, v)
		case r < 99:
			delete(model, key)
			st.Delete(key)
		default:
			st.Compact()
		}
		if i%50 == 49 {
			// Let the source catch up now and then, faults and all, so
			// that most changes arrive as watch events, not in lists.
			f.waitTable("catch up", func(txn statedb.ReadTxn) bool { return mapsEqual(f.contents(txn, ""), model) })
		}
	}
	return model, changes
}

// countingOps is a target that does nothing and counts Updates per key.
type countingOps struct {
	mu      sync.Mutex
	updates map[string]int
}

func (o *countingOps) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, obj *obj) error {
	o.mu.Lock()
	o.updates[obj.Key]++
	o.mu.Unlock()
	return nil
}

func (o *countingOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *obj) error {
	return nil
}

func (o *countingOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*obj, statedb.Revision]) error {
	return nil
}

func (o *countingOps) snapshot() map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.updates)
}

package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// How dependencies meet the rest of the engine: the waiting order, other
// replicas, health, and the full reconciliation's order.

// TestBlockedAgesFromRelease: a Blocked key does not age: its MaxWait
// clock starts when it becomes ready. Blocked for an hour, it is not
// overdue when released, and requests of a higher priority that were
// ready before it still go first; its dependency, of the top priority,
// goes first of all.
func TestBlockedAgesFromRelease(t *testing.T) {
	inBubble(t, func(cfg *reconciler.Config[*testObject]) {
		withDeps(cfg)
		cfg.MaxWait = 100 * time.Millisecond
		cfg.Priority = func(o *testObject) int {
			switch {
			case o.ID == "dir":
				return 2
			case strings.HasPrefix(o.ID, "hi"):
				return 1
			}
			return 0
		}
	}, func(f *fixture, ops *timedOps) {
		tg := f.target("")
		tg.SetLatency(func() time.Duration { return 3 * time.Millisecond })
		insert(t, f, pendingObject("file", "v>dir"))
		synctest.Wait()
		time.Sleep(time.Hour)
		insert(t, f, pendingObject("dir", "d"), pendingObject("hi1", "v"), pendingObject("hi2", "v"), pendingObject("hi3", "v"))
		synctest.Wait()
		time.Sleep(time.Second)
		synctest.Wait()
		want := []string{"update(dir)", "update(hi1)", "update(hi2)", "update(hi3)", "update(file)"}
		if got := tg.History(); !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}
	})
}

// TestDependencyOwnedElsewhere: a dependency another replica owns cannot
// be seen Done here: its dependent is Blocked, and Explain says why; once
// this replica owns it and reconciles it, the dependent is released.
func TestDependencyOwnedElsewhere(t *testing.T) {
	var own *flipOwnership
	inBubble(t, func(cfg *reconciler.Config[*testObject]) {
		own = newFlipOwnership() // in the bubble: its channel is waited on durably
		own.all, own.set = false, map[string]bool{"file": true}
		withDeps(cfg)
		cfg.Ownership = own
	}, func(f *fixture, ops *timedOps) {
		insert(t, f, pendingObject("dir", "d"), pendingObject("file", "v>dir"))
		synctest.Wait()
		e := explainKey(t, f, "file")
		if e.State != reconciler.KeyBlocked || e.Reason != "blocked on dir: owned by another replica: its Done is not seen here" {
			t.Fatalf("Explain: %s %q", e.State, e.Reason)
		}
		own.flip(f, true, nil)
		synctest.Wait()
		if st := tableStatus(f, "file"); st.Kind != reconciler.StatusKindDone {
			t.Fatalf("file %s after its dependency came to this replica:\n%s", st.Kind, explainKey(t, f, "file"))
		}
	})
}

// TestBlockedHealth: a key Blocked for over a minute makes health
// Degraded, naming it and what it waits for; released, health is OK.
func TestBlockedHealth(t *testing.T) {
	inBubble(t, withDeps, func(f *fixture, ops *timedOps) {
		insert(t, f, pendingObject("file", "v>dir"))
		synctest.Wait()
		level := func() (cell.Level, string) {
			h := f.jobHealth("reconcile")
			if h == nil {
				t.Fatal("no health for the reconciler's job")
			}
			h.Lock()
			defer h.Unlock()
			return h.Level, h.Status + ": " + fmt.Sprint(h.Error)
		}
		if l, msg := level(); l != cell.StatusOK {
			t.Fatalf("health %s %q after a few seconds blocked", l, msg)
		}
		time.Sleep(61 * time.Second)
		synctest.Wait()
		l, msg := level()
		if l != cell.StatusDegraded || !strings.Contains(msg, "1 key(s) blocked on dependencies") ||
			!strings.Contains(msg, "file: blocked on dir: not in the table") {
			t.Fatalf("health %s %q after a minute blocked", l, msg)
		}
		insert(t, f, pendingObject("dir", "d"))
		synctest.Wait()
		if l, msg := level(); l != cell.StatusOK {
			t.Fatalf("health %s %q once released", l, msg)
		}
	})
}

// pruneOrderOps records the order in which Prune sees the desired objects.
type pruneOrderOps struct {
	*timedOps
	mu   sync.Mutex
	seen []string
}

func (o *pruneOrderOps) Prune(ctx context.Context, txn statedb.ReadTxn, objs iter.Seq2[*testObject, statedb.Revision]) error {
	o.mu.Lock()
	o.seen = o.seen[:0]
	for obj := range objs {
		o.seen = append(o.seen, obj.ID)
	}
	o.mu.Unlock()
	return o.timedOps.Prune(ctx, txn, objs)
}

// TestPruneInDependencyOrder: Prune gets the desired objects dependencies
// first, whatever their order in the table.
func TestPruneInDependencyOrder(t *testing.T) {
	var ops *pruneOrderOps
	inBubble(t, func(cfg *reconciler.Config[*testObject]) {
		withDeps(cfg)
		ops = &pruneOrderOps{timedOps: cfg.Operations.(*timedOps)}
		cfg.Operations = ops
	}, func(f *fixture, _ *timedOps) {
		// In key order (the table's), each depends on the next.
		insert(t, f, pendingObject("a", "v>b"), pendingObject("b", "v>c"), pendingObject("c", "v>d"), pendingObject("d", "v"),
			pendingObject("e", "v"))
		synctest.Wait()
		r, _ := f.reconciler("")
		r.TriggerFullReconciliation()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := r.WaitUntilPruned(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
			t.Fatal(err)
		}
		ops.mu.Lock()
		defer ops.mu.Unlock()
		if want := []string{"d", "c", "b", "a", "e"}; !slices.Equal(ops.seen, want) {
			t.Fatalf("Prune saw %v, want %v", ops.seen, want)
		}
	})
}

// byGroup is docs/replicas.md's wrapper: it owns a key when it owns the
// key's group.
type byGroup struct {
	reconciler.Ownership
	group func(key []byte) []byte
}

func (o byGroup) Owns(key []byte) bool {
	if key == nil {
		return o.Ownership.Owns(nil)
	}
	return o.Ownership.Owns(o.group(key))
}

func (o byGroup) Acquire(ctx context.Context, key []byte) (context.Context, func(), bool) {
	if key == nil {
		return o.Ownership.Acquire(ctx, nil)
	}
	return o.Ownership.Acquire(ctx, o.group(key))
}

// TestDependencyGroupedOwnership: with docs/replicas.md's wrapper, a file
// goes with its directory's replica, and is not Blocked on it; another
// directory's file, owned elsewhere, is not this replica's work.
func TestDependencyGroupedOwnership(t *testing.T) {
	inBubble(t, func(cfg *reconciler.Config[*testObject]) {
		own := newFlipOwnership()
		own.all, own.set = false, map[string]bool{"d1": true}
		withDeps(cfg)
		cfg.Ownership = byGroup{own, func(key []byte) []byte {
			dir, _, _ := strings.Cut(string(key), "/")
			return []byte(dir)
		}}
	}, func(f *fixture, ops *timedOps) {
		insert(t, f, pendingObject("d1", "d"), pendingObject("d1/f", "v>d1"), pendingObject("d2", "d"), pendingObject("d2/f", "v>d2"))
		synctest.Wait()
		if st := tableStatus(f, "d1/f"); st.Kind != reconciler.StatusKindDone {
			t.Fatalf("d1/f %s:\n%s", st.Kind, explainKey(t, f, "d1/f"))
		}
		if e := explainKey(t, f, "d2/f"); e.State != reconciler.KeyNotOwned {
			t.Fatalf("d2/f: %s %q, want NotOwned", e.State, e.Reason)
		}
		if h := f.target("").History(); !slices.Equal(h, []string{"update(d1)", "update(d1/f)"}) {
			t.Fatalf("history %v", h)
		}
	})
}

// orderedSync records the order of the desired objects of each Sync.
type orderedSync struct {
	testSyncOps
	mu   sync.Mutex
	seen [][]string
}

func (o *orderedSync) Sync(ctx context.Context, txn statedb.ReadTxn, desired iter.Seq2[*testObject, statedb.Revision], changes iter.Seq[reconciler.Change[*testObject]]) error {
	var ids []string
	for obj := range desired {
		ids = append(ids, obj.ID)
	}
	o.mu.Lock()
	o.seen = append(o.seen, ids)
	o.mu.Unlock()
	return o.testSyncOps.Sync(ctx, txn, desired, changes)
}

// TestSyncInDependencyOrder: a whole-set Sync gets the desired objects
// dependencies first, whatever their order in the table.
func TestSyncInDependencyOrder(t *testing.T) {
	var ops *orderedSync
	inSyncBubble(t, func(cfg *reconciler.Config[*testObject]) {
		withDeps(cfg)
		ops = &orderedSync{testSyncOps: cfg.SyncOperations.(*timedSync).testSyncOps}
		cfg.SyncOperations = ops
	}, func(f *fixture, _ *timedSync) {
		insert(t, f, pendingObject("a", "v>b"), pendingObject("b", "v>c"), pendingObject("c", "v"), pendingObject("d", "v>a"))
		f.markInit()
		synctest.Wait()
		ops.mu.Lock()
		defer ops.mu.Unlock()
		if len(ops.seen) == 0 {
			t.Fatal("no Sync ran")
		}
		if got, want := ops.seen[len(ops.seen)-1], []string{"c", "b", "a", "d"}; !slices.Equal(got, want) {
			t.Fatalf("Sync saw %v, want %v", got, want)
		}
	})
}

// TestObserversSeeBlockedAndReleased: an observer is told when a request
// blocks on a dependency (its Err says which, as Explain does) and when
// it is released, before it starts.
func TestObserversSeeBlockedAndReleased(t *testing.T) {
	rec := &recorder{}
	inBubble(t, func(cfg *reconciler.Config[*testObject]) {
		withDeps(cfg)
		cfg.Observers = []reconciler.Observer{rec}
	}, func(f *fixture, ops *timedOps) {
		insert(t, f, pendingObject("file", "v>dir"))
		synctest.Wait()
		insert(t, f, pendingObject("dir", "d"))
		synctest.Wait()
		kinds, events := rec.of("file")
		want := []string{"read", "blocked", "released", "ready", "started", "finished", "committed"}
		if !slices.Equal(kinds, want) {
			t.Fatalf("file's events %v, want %v", kinds, want)
		}
		if err := events[1].Err; err == nil || err.Error() != "blocked on dir: not in the table" {
			t.Fatalf("blocked event's Err %v", err)
		}
	})
}

// TestDependencyGainedKeepsDeleteBlocked: a key this replica owns again
// counts, from then on, as what its object in the table names, as at
// startup: the target may hold it, applied by this replica before or by
// the owner meanwhile. Its dependency's Delete waits for it even before
// its refresh runs. Here the refresh waits behind a stuck Update on its
// target while the dependency, on another target, is deleted.
func TestDependencyGainedKeepsDeleteBlocked(t *testing.T) {
	var own *flipOwnership
	inBubble(t, func(cfg *reconciler.Config[*testObject]) {
		own = newFlipOwnership()
		withDeps(cfg)
		cfg.Ownership = own
		cfg.Concurrency, cfg.TargetConcurrency = 4, 1
		cfg.TargetKey = func(o *testObject) string {
			if o.ID == "dir" {
				return "b"
			}
			return "a"
		}
	}, func(f *fixture, ops *timedOps) {
		tg := f.target("")
		insert(t, f, pendingObject("dir", "d"), pendingObject("file", "v>dir"))
		synctest.Wait()
		if st := tableStatus(f, "file"); st.Kind != reconciler.StatusKindDone {
			t.Fatalf("file %s, want Done", st.Kind)
		}
		own.flip(f, false, map[string]bool{})
		synctest.Wait()
		tg.SetFault("blocker", fake.Fault{Mode: fake.ModeStuck})
		own.flip(f, true, nil)
		insert(t, f, pendingObject("blocker", "b")) // target a: file's refresh waits behind it
		synctest.Wait()
		deleteKeys(t, f, "dir")
		synctest.Wait()
		if h := tg.History(); slices.Contains(h, "delete(dir)") {
			t.Fatalf("dir deleted while the target holds file, which names it: %v", h)
		}
		if e := explainKey(t, f, "dir"); e.State != reconciler.KeyBlocked || !strings.Contains(e.Reason, "depend on it to be deleted from the target: file") {
			t.Fatalf("Explain dir: %s %q", e.State, e.Reason)
		}
		tg.Heal("blocker")
		deleteKeys(t, f, "file")
		synctest.Wait()
		h := tg.History()
		if i, j := slices.Index(h, "delete(file)"), slices.Index(h, "delete(dir)"); i < 0 || j < i {
			t.Fatalf("dir not deleted after file: %v", h)
		}
	})
}

// TestDependencyGainedRefreshBlockedIsDone: a key owned again is applied
// again as a refresh, its Done kept in the table; while that refresh
// waits (Blocked here: its own dependency left the table meanwhile), its
// dependents read it Done, as the table says, and go on.
func TestDependencyGainedRefreshBlockedIsDone(t *testing.T) {
	var own *flipOwnership
	inBubble(t, func(cfg *reconciler.Config[*testObject]) {
		own = newFlipOwnership()
		withDeps(cfg)
		cfg.Ownership = own
	}, func(f *fixture, ops *timedOps) {
		insert(t, f, pendingObject("m", "m"), pendingObject("a", "v>m"), pendingObject("b", "v>a"))
		synctest.Wait()
		own.flip(f, false, map[string]bool{})
		synctest.Wait()
		deleteKeys(t, f, "m")                    // the owner's work, read while not owned
		insert(t, f, pendingObject("b", "v2>a")) // b changed meanwhile
		synctest.Wait()
		own.flip(f, true, nil)
		synctest.Wait()
		if e := explainKey(t, f, "a"); e.State != reconciler.KeyBlocked || e.Reason != "blocked on m: not in the table" {
			t.Fatalf("a's refresh: %s %q", e.State, e.Reason)
		}
		if st := tableStatus(f, "b"); st.Kind != reconciler.StatusKindDone {
			t.Fatalf("b %s, want Done: a is Done in the table\n%s", st.Kind, explainKey(t, f, "b"))
		}
	})
}

// TestDependencyGainedReleasesWaiters: a key Blocked on a dependency
// another replica owned goes on once this replica owns the dependency
// again and the table holds its Done, though the dependency's own
// refresh waits.
func TestDependencyGainedReleasesWaiters(t *testing.T) {
	var own *flipOwnership
	inBubble(t, func(cfg *reconciler.Config[*testObject]) {
		own = newFlipOwnership()
		withDeps(cfg)
		cfg.Ownership = own
	}, func(f *fixture, ops *timedOps) {
		insert(t, f, pendingObject("m", "m"), pendingObject("a", "v>m"))
		synctest.Wait()
		own.flip(f, false, map[string]bool{"b": true})
		synctest.Wait()
		deleteKeys(t, f, "m") // the owner's work, read while not owned
		insert(t, f, pendingObject("b", "v>a"))
		synctest.Wait()
		if e := explainKey(t, f, "b"); e.State != reconciler.KeyBlocked || !strings.Contains(e.Reason, "owned by another replica") {
			t.Fatalf("b: %s %q", e.State, e.Reason)
		}
		own.flip(f, true, nil)
		synctest.Wait()
		if st := tableStatus(f, "b"); st.Kind != reconciler.StatusKindDone {
			t.Fatalf("b %s once a is owned here and Done in the table\n%s\na: %s", st.Kind, explainKey(t, f, "b"), explainKey(t, f, "a"))
		}
	})
}

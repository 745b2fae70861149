package source_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/dirsource"
	"github.com/converge-go/converge/source/sourcetest"
)

// TestModel drives a source, with a reconciler behind it, through random
// steps, checked against a model after each, and restarts the agent over
// a target that outlives it. It runs a sourcetest store and a directory
// of real files. Steps: good and bad items, items yielding objects
// another item yields too (duplicates), objects moving between items,
// renamed items, a second writer (the "api") taking rows over and giving
// them back, unreadable entries (a FIFO), store outages, restarts.
//
// Invariants, after each step: the table is what the model says (the
// first item by key gives an object's content; a failing item keeps what
// this process read of it); no object an item yields (a failing one: what
// it last yielded) is missing from the target; the api's rows are
// intact and the source never wrote one; no write rewrote an unchanged
// row; the table is initialized unless an item has failed since the
// restart; health is Degraded exactly while something is wrong. At the
// end, with every fault gone, the target equals the good items' objects.
//
// It runs seeds 1-3; CONVERGE_SOURCE_MODEL_SEED replays one seed, and
// CONVERGE_SOURCE_MODEL_SEEDS=N runs seeds 1..N (scripts/soak.sh).
func TestModel(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	if s := os.Getenv("CONVERGE_SOURCE_MODEL_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		seeds = []uint64{seed}
	} else if s := os.Getenv("CONVERGE_SOURCE_MODEL_SEEDS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		seeds = seeds[:0]
		for i := range n {
			seeds = append(seeds, uint64(i)+1)
		}
	}
	for _, seed := range seeds {
		for _, backend := range []string{"store", "dir"} {
			t.Run(fmt.Sprintf("%s/seed=%d", backend, seed), func(t *testing.T) {
				t.Logf("replay: CONVERGE_SOURCE_MODEL_SEED=%d go test -race -run 'TestModel/%s' ./source", seed, backend)
				newModel(t, backend, seed).run(40)
			})
		}
	}
}

// model is the test's picture of the world and the agent.
type model struct {
	t       *testing.T
	rng     *rand.Rand
	backend string
	st      *sourcetest.Store[string]
	dir     string
	tg      *memTarget

	items    map[string]string   // item key -> value ("bad", or "o1=a o3=b", or "-")
	known    map[string][]objVal // what this process read of each item (kept while it fails)
	lastGood map[string][]string // object keys each item yielded when last good, across restarts
	neverRd  map[string]bool     // failing since the last restart
	tainted  map[string]bool     // objects deleted (another item dropped them) since a good item last yielded them
	api      map[string]bool     // objects the api holds
	inited   bool                // this process has initialized the table

	f   *fixture
	src source.Source
	rec reconciler.Reconciler[*obj]

	mu     sync.Mutex
	faults []string // invariant violations seen by hooks
	outage bool
}

type objVal struct{ key, val string }

var objKeys = []string{"o0", "o1", "o2", "o3", "o4"}

func newModel(t *testing.T, backend string, seed uint64) *model {
	m := &model{
		t: t, rng: rand.New(rand.NewPCG(seed, 7)), backend: backend, tg: &memTarget{objs: map[string]string{}},
		items: map[string]string{}, known: map[string][]objVal{}, lastGood: map[string][]string{},
		neverRd: map[string]bool{}, tainted: map[string]bool{}, api: map[string]bool{},
	}
	if backend == "store" {
		m.st = sourcetest.NewStore[string]()
		m.st.ListErr = func() error {
			m.mu.Lock()
			defer m.mu.Unlock()
			if m.outage {
				return errInjected
			}
			return nil
		}
	} else {
		m.dir = t.TempDir()
	}
	return m
}

// parse is the items' Transform: "bad" fails, "-" yields nothing.
func parse(v string) ([]objVal, error) {
	if v == "bad" || v == "fifo" {
		return nil, fmt.Errorf("line 1: bad value")
	}
	var out []objVal
	for _, f := range strings.Fields(v) {
		if f == "-" {
			continue
		}
		k, val, _ := strings.Cut(f, "=")
		out = append(out, objVal{k, val})
	}
	return out, nil
}

func (m *model) fault(format string, args ...any) {
	m.mu.Lock()
	m.faults = append(m.faults, fmt.Sprintf(format, args...))
	m.mu.Unlock()
}

// start runs a new agent process: a hive with the api's rows (loaded at
// start, as from a file), the source and a reconciler over the target.
func (m *model) start() {
	m.f = newFixture(m.t, func(f *fixture, p source.Params) (err error) {
		wtxn := f.db.WriteTxn(f.table)
		apiDone := f.table.RegisterInitializer(wtxn, "api")
		for o := range m.api {
			f.table.Insert(wtxn, &obj{Key: o, Value: "api", Owner: "api", Status: reconciler.StatusPending()})
		}
		apiDone(wtxn)
		wtxn.Commit()
		cfg := source.Config[string, *obj]{
			Name: "s", Table: f.table, Equal: equal, Owns: func(o *obj) bool { return o.Owner == "s" },
			Owner:      func(o *obj) string { return o.Owner },
			BufferWait: time.Millisecond, BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond,
			Pending: func(o *obj) *obj {
				cur, _, found := f.table.Get(f.db.ReadTxn(), keyIndex.Query(o.Key))
				switch {
				case found && cur.Owner == "api":
					m.fault("the source wrote %s over the api's row", o.Key)
				case found && equal(cur, o):
					m.fault("the source rewrote %s unchanged (%s)", o.Key, o.Value)
				}
				return pending(o)
			},
		}
		transform := func(key, v string) ([]*obj, error) {
			ovs, err := parse(v)
			objs := make([]*obj, len(ovs))
			for i, ov := range ovs {
				objs[i] = &obj{Key: ov.key, Value: ov.val, Owner: "s"}
			}
			return objs, err
		}
		if m.backend == "store" {
			cfg.ListerWatcher, cfg.Transform = m.st, transform
			m.src, err = source.New(cfg, p)
		} else {
			dc := source.Config[dirsource.File, *obj]{
				Name: cfg.Name, Table: cfg.Table, Equal: cfg.Equal, Owns: cfg.Owns, Owner: cfg.Owner, Pending: cfg.Pending,
				BufferWait: cfg.BufferWait, BackoffMin: cfg.BackoffMin, BackoffMax: cfg.BackoffMax, Resync: source.Off,
			}
			m.src, err = dirsource.New(dirsource.Config[*obj]{
				Dir: m.dir, Debounce: 2 * time.Millisecond, Source: dc,
				Decode: func(name string, data []byte) ([]*obj, error) { return transform(name, string(data)) },
			}, p)
		}
		if err != nil {
			return err
		}
		m.rec, err = reconciler.New(reconciler.Config[*obj]{
			Table:           f.table,
			GetObjectStatus: func(o *obj) reconciler.Status { return o.Status },
			SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
			CloneObject:     func(o *obj) *obj { c := *o; return &c },
			Operations:      m.tg,
			RefreshInterval: reconciler.Off,
		}, f.rp)
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	m.f.ctx = ctx
	m.t.Cleanup(cancel)
	if err := m.f.hive.Start(m.f.log, ctx); err != nil {
		m.t.Fatal(err)
	}
	// What this process knows: the good items as listed now.
	m.inited = false
	clear(m.known)
	clear(m.neverRd)
	for k, v := range m.items {
		if ovs, err := parse(v); err == nil {
			m.known[k] = ovs
		} else {
			m.neverRd[k] = true
		}
	}
}

func (m *model) stop() {
	if err := m.f.hive.Stop(m.f.log, context.Background()); err != nil {
		m.t.Fatal(err)
	}
}

func (m *model) path(key string) string { return filepath.Join(m.dir, key) }

// setItem writes an item's value to the store or the directory.
func (m *model) setItem(key, v string) {
	if m.backend == "store" {
		m.st.Set(key, v)
		return
	}
	// Written aside and renamed over the old entry (a FIFO too), as a
	// careful writer does: the item is never absent. Removing the old file
	// first left a window in which the source could see the item deleted,
	// and a deleted item's objects go; under load it did (a break lost
	// what the model says a failing item keeps).
	tmp := m.path("." + key + ".tmp")
	if err := os.WriteFile(tmp, []byte(v), 0o644); err != nil {
		m.t.Fatal(err)
	}
	if err := os.Rename(tmp, m.path(key)); err != nil {
		m.t.Fatal(err)
	}
}

func (m *model) deleteItem(key string) {
	if m.backend == "store" {
		m.st.Delete(key)
	} else if err := os.Remove(m.path(key)); err != nil {
		m.t.Fatal(err)
	}
}

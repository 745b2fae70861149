package source_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

// obj is the desired object of the tests: a key, a value, the writer that
// owns it, and a status.
type obj struct {
	Key    string            `yaml:"key"`
	Value  string            `yaml:"value"`
	Owner  string            `yaml:"owner"`
	Status reconciler.Status `yaml:"status"`
}

func (o *obj) TableHeader() []string { return []string{"Key", "Value", "Owner", "Status"} }
func (o *obj) TableRow() []string {
	return []string{o.Key, o.Value, o.Owner, o.Status.Kind.String()}
}

var keyIndex = statedb.Index[*obj, string]{
	Name:       "key",
	FromObject: func(o *obj) index.KeySet { return index.NewKeySet(index.String(o.Key)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

func equal(a, b *obj) bool { return a.Key == b.Key && a.Value == b.Value && a.Owner == b.Owner }

func pending(o *obj) *obj { o.Status = reconciler.StatusPending(); return o }

// fixture is one test hive with the objects table and the sources its
// add function registers.
type fixture struct {
	t      testing.TB
	log    *slog.Logger
	hive   *hive.Hive
	db     *statedb.DB
	table  statedb.RWTable[*obj]
	rp     reconciler.Params // for tests that add a reconciler
	reg    *source.Registry
	health *cell.SimpleHealth
	ctx    context.Context
}

// newFixture builds a hive whose "test" module creates the table and
// calls add with the source.Params.
func newFixture(t testing.TB, add func(f *fixture, p source.Params) error) *fixture {
	f := &fixture{t: t, log: hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))}
	f.hive = hive.New(
		statedb.Cell,
		job.Cell,
		source.Cell,
		cell.Provide(
			cell.NewSimpleHealth,
			func(h *cell.SimpleHealth) hive.ScriptCmdOut {
				return hive.NewScriptCmd("health", cell.SimpleHealthCmd(h))
			},
		),
		cell.Module("test", "Test",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p source.Params, rp reconciler.Params, reg *source.Registry, h *cell.SimpleHealth) (err error) {
				f.db, f.rp, f.reg, f.health = db, rp, reg, h
				f.table, err = statedb.NewTable(db, "objects", keyIndex)
				if err != nil {
					return err
				}
				return add(f, p)
			}),
		),
	)
	return f
}

// start starts the hive and stops it when the test ends.
func (f *fixture) start(timeout time.Duration) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	f.t.Cleanup(cancel)
	f.ctx = ctx
	if err := f.hive.Start(f.log, ctx); err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() {
		if err := f.hive.Stop(f.log, context.Background()); err != nil {
			f.t.Error(err)
		}
	})
}

// storeConfig is the usual config of a source over a sourcetest store of
// values: one object per item, owned by name.
func storeConfig(name string, tbl statedb.RWTable[*obj], st *sourcetest.Store[string]) source.Config[string, *obj] {
	return source.Config[string, *obj]{
		Name:          name,
		Table:         tbl,
		ListerWatcher: st,
		Transform: func(key, v string) ([]*obj, error) {
			if strings.HasPrefix(v, "bad") {
				return nil, fmt.Errorf("value %q is bad", v)
			}
			return []*obj{{Key: key, Value: v, Owner: name}}, nil
		},
		Equal:      equal,
		Pending:    pending,
		Owns:       func(o *obj) bool { return o.Owner == name },
		BufferWait: time.Millisecond,
		BackoffMin: time.Millisecond,
		BackoffMax: 10 * time.Millisecond,
	}
}

// waitTable waits until cond holds for the table, or fails the test
// after 20 seconds. It wakes on table changes, not on a timer.
func (f *fixture) waitTable(what string, cond func(txn statedb.ReadTxn) bool) {
	f.t.Helper()
	f.waitTableOr(what, cond, func() string { return "" })
}

// waitTableOr is waitTable whose failure also says what detail returns
// then: what the table held instead.
func (f *fixture) waitTableOr(what string, cond func(txn statedb.ReadTxn) bool, detail func() string) {
	f.t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		txn := f.db.ReadTxn()
		_, watch := f.table.AllWatch(txn)
		initialized, initWatch := f.table.Initialized(txn)
		if initialized {
			initWatch = nil // closed: it would spin
		}
		if cond(txn) {
			return
		}
		select {
		case <-watch:
		case <-initWatch:
		case <-deadline:
			f.t.Fatalf("timed out waiting for %s %s", what, detail())
		}
	}
}

// waitStatus waits (polling the snapshot on table changes and every
// few milliseconds, bounded) until cond holds for the source's status.
func waitStatus(t testing.TB, s source.Source, what string, cond func(source.StatusSnapshot) bool) source.StatusSnapshot {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		snap := s.Status()
		if cond(snap) {
			return snap
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; status %+v", what, snap)
		}
		<-tick.C
	}
}

// contents returns the table as key -> value for the rows owned by owner
// ("" for all).
func (f *fixture) contents(txn statedb.ReadTxn, owner string) map[string]string {
	out := map[string]string{}
	for o := range f.table.All(txn) {
		if owner == "" || o.Owner == owner {
			out[o.Key] = o.Value
		}
	}
	return out
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

var errInjected = errors.New("injected list failure")

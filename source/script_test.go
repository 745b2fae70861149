package source_test

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

// TestScript runs testdata/*.txtar: a hive with sources "a" and "b" over
// two stores that the store/... commands change.
func TestScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	scripttest.Test(t, ctx,
		func(t testing.TB, args []string) *script.Engine {
			stores := map[string]*sourcetest.Store[string]{}
			expire := map[string]*atomic.Bool{}
			for _, name := range []string{"a", "b"} {
				st := sourcetest.NewStore[string]()
				flag := new(atomic.Bool)
				st.Faults = func(source.Event[string]) sourcetest.Fault {
					if flag.CompareAndSwap(true, false) {
						return sourcetest.Expire
					}
					return sourcetest.None
				}
				stores[name], expire[name] = st, flag
			}
			f := newFixture(t, func(f *fixture, p source.Params) error {
				for _, name := range []string{"a", "b"} {
					if err := source.Register(storeConfig(name, f.table, stores[name]), p); err != nil {
						return err
					}
				}
				return nil
			})
			cmds, err := f.hive.ScriptCommands(f.log)
			if err != nil {
				t.Fatalf("ScriptCommands: %s", err)
			}
			maps.Insert(cmds, maps.All(script.DefaultCmds()))
			maps.Insert(cmds, maps.All(storeCommands(stores, expire)))
			t.Cleanup(func() {
				if err := f.hive.Stop(f.log, context.Background()); err != nil {
					t.Errorf("hive stop: %s", err)
				}
			})
			return &script.Engine{Cmds: cmds, RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 100 * time.Millisecond}
		},
		[]string{}, "testdata/*.txtar")
}

// storeCommands change the test stores: store/set, store/delete,
// store/expire (the next watch event fails with ErrExpired) and
// store/compact.
func storeCommands(stores map[string]*sourcetest.Store[string], expire map[string]*atomic.Bool) map[string]script.Cmd {
	get := func(name string) (*sourcetest.Store[string], error) {
		if st, ok := stores[name]; ok {
			return st, nil
		}
		return nil, fmt.Errorf("no store %q", name)
	}
	cmd := func(summary, args string, n int, fn func(st *sourcetest.Store[string], args []string)) script.Cmd {
		return script.Command(script.CmdUsage{Summary: summary, Args: args},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != n {
					return nil, script.ErrUsage
				}
				st, err := get(args[0])
				if err != nil {
					return nil, err
				}
				fn(st, args[1:])
				return nil, nil
			})
	}
	return map[string]script.Cmd{
		"store/set":     cmd("Set a key in a store", "store key value", 3, func(st *sourcetest.Store[string], a []string) { st.Set(a[0], a[1]) }),
		"store/delete":  cmd("Delete a key from a store", "store key", 2, func(st *sourcetest.Store[string], a []string) { st.Delete(a[0]) }),
		"store/compact": cmd("Forget a store's change log", "store", 1, func(st *sourcetest.Store[string], _ []string) { st.Compact() }),
		"store/expire": script.Command(script.CmdUsage{Summary: "Make a store's next watch event fail with ErrExpired", Args: "store"},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != 1 || expire[args[0]] == nil {
					return nil, script.ErrUsage
				}
				expire[args[0]].Store(true)
				return nil, nil
			}),
	}
}

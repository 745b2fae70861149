package reconciler_test

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"
)

func TestScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	scripttest.Test(t, ctx,
		func(t testing.TB, args []string) *script.Engine {
			f := newFixture(t)
			cmds, err := f.hive.ScriptCommands(f.log)
			if err != nil {
				t.Fatalf("ScriptCommands: %s", err)
			}
			maps.Insert(cmds, maps.All(script.DefaultCmds()))
			maps.Insert(cmds, maps.All(f.commands()))
			t.Cleanup(func() {
				if err := f.hive.Stop(f.log, context.Background()); err != nil {
					t.Errorf("hive stop: %s", err)
				}
			})
			return &script.Engine{Cmds: cmds, RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 100 * time.Millisecond}
		},
		[]string{}, "testdata/*.txtar")
}

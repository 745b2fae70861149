package metrics_test

import (
	"context"
	"flag"
	"maps"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"
	"github.com/spf13/pflag"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

// TestScript runs testdata/*.txtar: a hive with the metrics cell (Cell, or
// ExpVarCell with "#! --expvar"), reconciler.Cell for reconciler/wait and
// reconciler/full, and the reconciler "routes" of module "test" over the
// table "objects".
func TestScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	scripttest.Test(t, ctx,
		func(t testing.TB, args []string) *script.Engine {
			fs := flag.NewFlagSet("script", flag.ContinueOnError)
			useExpVar := fs.Bool("expvar", false, "use metrics.ExpVarCell")
			if err := fs.Parse(args); err != nil {
				t.Fatalf("script arguments: %s", err)
			}
			metricsCell := metrics.Cell
			if *useExpVar {
				metricsCell = metrics.ExpVarCell
			}
			f := newFixture(t, "routes", nil, metricsCell, reconciler.Cell)
			log := hivetest.Logger(t)
			cmds, err := f.hive.ScriptCommands(log)
			if err != nil {
				t.Fatalf("ScriptCommands: %s", err)
			}
			maps.Insert(cmds, maps.All(script.DefaultCmds()))
			maps.Insert(cmds, maps.All(targetCmds(f.target)))
			t.Cleanup(func() {
				if err := f.hive.Stop(log, context.Background()); err != nil {
					t.Errorf("hive stop: %s", err)
				}
			})
			return &script.Engine{Cmds: cmds, RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 100 * time.Millisecond}
		},
		[]string{}, "testdata/*.txtar")
}

// targetCmds drive the fake target.
func targetCmds(tgt *fake.Target) map[string]script.Cmd {
	return map[string]script.Cmd{
		"target/fail": script.Command(
			script.CmdUsage{
				Summary: "Make the target fail for a key ('*' for all, 'prune' for Prune)",
				Args:    "key mode",
				Flags:   func(fs *pflag.FlagSet) { fs.Int("count", 0, "fail this many times (0: until healed)") },
			},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != 2 {
					return nil, script.ErrUsage
				}
				count, _ := s.Flags.GetInt("count")
				tgt.SetFault(args[0], fake.Fault{Mode: fake.Mode(args[1]), Count: count})
				return nil, nil
			}),
		"target/heal": script.Command(
			script.CmdUsage{Summary: "Remove every fault"},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				tgt.Heal("")
				return nil, nil
			}),
	}
}

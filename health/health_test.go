package health_test

import (
	"context"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"
	"go.uber.org/goleak"

	"github.com/converge-go/converge/health"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestScript runs testdata/*.txtar: the "health" command of a hive with
// Cell prints every job's health to the shell's output, where stdout
// matches it.
func TestScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	scripttest.Test(t, ctx,
		func(t testing.TB, args []string) *script.Engine {
			log := hivetest.Logger(t)
			h := hive.New(
				job.Cell,
				health.Cell,
				cell.Module("demo", "Demo",
					cell.ProvidePrivate(job.Registry.NewGroup),
					cell.Invoke(func(g job.Group) {
						g.Add(job.OneShot("ready", func(ctx context.Context, h cell.Health) error {
							h.OK("ready")
							<-ctx.Done()
							return nil
						}))
						g.Add(job.OneShot("broken", func(ctx context.Context, h cell.Health) error {
							h.Degraded("broken", errors.New("boom"))
							<-ctx.Done()
							return nil
						}))
					}),
				),
			)
			cmds, err := h.ScriptCommands(log)
			if err != nil {
				t.Fatalf("ScriptCommands: %s", err)
			}
			maps.Insert(cmds, maps.All(script.DefaultCmds()))
			t.Cleanup(func() {
				if err := h.Stop(log, context.Background()); err != nil {
					t.Errorf("hive stop: %s", err)
				}
			})
			return &script.Engine{Cmds: cmds, RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 100 * time.Millisecond}
		},
		[]string{}, "testdata/*.txtar")
}

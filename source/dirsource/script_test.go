package dirsource_test

import (
	"context"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/hive/script"
	"github.com/cilium/hive/script/scripttest"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/dirsource"
)

// TestScript runs testdata/*.txtar against a hive with a directory source
// "dir" over a fresh temporary directory, on real inotify. The
// manifests/... commands change that directory the way people and
// programs do.
func TestScript(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	scripttest.Test(t, ctx,
		func(t testing.TB, args []string) *script.Engine {
			dir := t.TempDir()
			log := hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))
			h := hive.New(
				statedb.Cell, job.Cell, source.Cell,
				cell.Provide(
					cell.NewSimpleHealth,
					func(h *cell.SimpleHealth) hive.ScriptCmdOut {
						return hive.NewScriptCmd("health", cell.SimpleHealthCmd(h))
					},
				),
				cell.Module("test", "Test",
					cell.Provide(job.Registry.NewGroup),
					cell.Invoke(func(db *statedb.DB, p source.Params) error {
						table, err := statedb.NewTable(db, "objects", keyIndex)
						if err != nil {
							return err
						}
						return dirsource.Register(dirsource.Config[*obj]{
							Dir:      dir,
							Decode:   decode,
							Debounce: 20 * time.Millisecond,
							Source: source.Config[dirsource.File, *obj]{
								Name:    "dir",
								Table:   table,
								Equal:   func(a, b *obj) bool { return *a == *b },
								Pending: func(o *obj) *obj { o.Status = reconciler.StatusPending(); return o },
							},
						}, p)
					}),
				),
			)
			cmds, err := h.ScriptCommands(log)
			if err != nil {
				t.Fatalf("ScriptCommands: %s", err)
			}
			maps.Insert(cmds, maps.All(script.DefaultCmds()))
			maps.Insert(cmds, maps.All(manifestCommands(dir)))
			t.Cleanup(func() {
				if err := h.Stop(log, context.Background()); err != nil {
					t.Errorf("hive stop: %s", err)
				}
			})
			return &script.Engine{Cmds: cmds, RetryInterval: 10 * time.Millisecond, MaxRetryInterval: 100 * time.Millisecond}
		},
		[]string{}, "testdata/*.txtar")
}

// manifestCommands change the watched directory: manifests/put copies a
// file of the archive into it (written to a temporary name and renamed
// into place), manifests/write writes it in place (not atomically),
// manifests/rm removes a manifest and manifests/mv renames one.
func manifestCommands(dir string) map[string]script.Cmd {
	copyIn := func(atomic bool) func(s *script.State, args ...string) (script.WaitFunc, error) {
		return func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 2 {
				return nil, script.ErrUsage
			}
			data, err := os.ReadFile(s.Path(args[0]))
			if err != nil {
				return nil, err
			}
			dst := filepath.Join(dir, args[1])
			if !atomic {
				return nil, os.WriteFile(dst, data, 0o644)
			}
			tmp := filepath.Join(dir, "."+args[1]+".tmp")
			if err := os.WriteFile(tmp, data, 0o644); err != nil {
				return nil, err
			}
			return nil, os.Rename(tmp, dst)
		}
	}
	return map[string]script.Cmd{
		"manifests/put":   script.Command(script.CmdUsage{Summary: "Write a manifest atomically (temp file, rename)", Args: "file name"}, copyIn(true)),
		"manifests/write": script.Command(script.CmdUsage{Summary: "Write a manifest in place", Args: "file name"}, copyIn(false)),
		"manifests/rm": script.Command(script.CmdUsage{Summary: "Remove a manifest", Args: "name"},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != 1 {
					return nil, script.ErrUsage
				}
				return nil, os.Remove(filepath.Join(dir, args[0]))
			}),
		"manifests/mv": script.Command(script.CmdUsage{Summary: "Rename a manifest", Args: "from to"},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != 2 {
					return nil, script.ErrUsage
				}
				return nil, os.Rename(filepath.Join(dir, args[0]), filepath.Join(dir, args[1]))
			}),
	}
}

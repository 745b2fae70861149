package reconciler_test

import (
	"context"
	"maps"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/script"
	"github.com/spf13/pflag"

	"github.com/converge-go/converge/reconciler"
)

// nameFlag is the --name option of the commands that address one
// reconciler (and its target).
func nameFlag(fs *pflag.FlagSet) { fs.String("name", "", "reconciler (and target) name") }

// withName is nameFlag and the options extra adds.
func withName(extra func(fs *pflag.FlagSet)) func(fs *pflag.FlagSet) {
	return func(fs *pflag.FlagSet) {
		nameFlag(fs)
		if extra != nil {
			extra(fs)
		}
	}
}

// cmdName is the --name a command was given.
func cmdName(s *script.State) string { n, _ := s.Flags.GetString("name"); return n }

// onReconciler is a command that calls do on the reconciler --name
// addresses.
func (f *fixture) onReconciler(summary string, do func(reconciler.Reconciler[*testObject])) script.Cmd {
	return script.Command(
		script.CmdUsage{Summary: summary, Flags: nameFlag},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			r, err := f.reconciler(cmdName(s))
			if err == nil {
				do(r)
			}
			return nil, err
		})
}

// commands are the script commands of the fixture, besides the hive's own:
// these, which drive reconcilers, and targetCommands.
func (f *fixture) commands() map[string]script.Cmd {
	cmds := f.targetCommands()
	maps.Insert(cmds, maps.All(map[string]script.Cmd{
		"start": script.Command(
			script.CmdUsage{Summary: "Construct a reconciler over test-objects", Flags: startFlags},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				return nil, f.start(s)
			}),
		"mark-init": script.Command(
			script.CmdUsage{Summary: "Mark test-objects initialized"},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				f.markInit()
				return nil, nil
			}),
		"full":    f.onReconciler("Trigger a full reconciliation", reconciler.Reconciler[*testObject].TriggerFullReconciliation),
		"suspend": f.onReconciler("Suspend a reconciler", reconciler.Reconciler[*testObject].Suspend),
		"resume":  f.onReconciler("Resume a reconciler", reconciler.Reconciler[*testObject].Resume),
		"wait": script.Command(
			script.CmdUsage{
				Summary: "Wait until every change so far is reconciled",
				Flags: withName(func(fs *pflag.FlagSet) {
					fs.Bool("no-status", false, "skip WaitForReconciliation (for StatusSet objects)")
				}),
			},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				r, err := f.reconciler(cmdName(s))
				if err != nil {
					return nil, err
				}
				noStatus, _ := s.Flags.GetBool("no-status")
				ctx, cancel := context.WithTimeout(s.Context(), 5*time.Second)
				defer cancel()
				return nil, f.waitReconciled(ctx, r, !noStatus)
			}),
	}))
	return cmds
}

// testConfig fills in the Config fields every test over testObject sets
// the same way (the table, the object's own Status, Clone) and ops; cfg
// carries what the test is about.
func testConfig(f *fixture, ops reconciler.Operations[*testObject], cfg reconciler.Config[*testObject]) reconciler.Config[*testObject] {
	cfg.Table = f.table
	cfg.GetObjectStatus = func(o *testObject) reconciler.Status { return o.Status }
	cfg.SetObjectStatus = func(o *testObject, s reconciler.Status) *testObject { o.Status = s; return o }
	cfg.CloneObject = (*testObject).Clone
	cfg.Operations = ops
	if cfg.InitialPruneDelay == 0 {
		// The fixture's table has an initializer, but a test may mark
		// it done before the reconciler's job has started, and then it
		// cannot be told from none (firsthour_test.go tests the delay).
		cfg.InitialPruneDelay = reconciler.Off
	}
	return cfg
}

// jobHealth returns the health of the test module's job, or nil.
func (f *fixture) jobHealth(job string) *cell.SimpleHealth {
	for _, name := range []string{"test.job-" + job, "job-" + job, "test." + job} {
		if h := f.health.GetChild(name); h != nil {
			return h
		}
	}
	return nil
}

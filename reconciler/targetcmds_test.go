package reconciler_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/cilium/hive/script"
	"github.com/spf13/pflag"

	"github.com/converge-go/converge/internal/fake"
)

// targetCommands are the target/... script commands: they program the
// fake target of a reconciler (--name) and check what it was asked to do.
func (f *fixture) targetCommands() map[string]script.Cmd {
	return map[string]script.Cmd{
		"target/fail": script.Command(
			script.CmdUsage{
				Summary: "Make the target fail for a key ('*' for all, 'prune' for Prune)",
				Args:    "key mode",
				Flags: withName(func(fs *pflag.FlagSet) {
					fs.Int("count", 0, "fail this many times, then heal (0: until healed)")
					fs.Duration("after", 0, "the delay of retry-after and defer")
				}),
			},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != 2 {
					return nil, script.ErrUsage
				}
				count, _ := s.Flags.GetInt("count")
				after, _ := s.Flags.GetDuration("after")
				f.target(cmdName(s)).SetFault(args[0], fake.Fault{Mode: fake.Mode(args[1]), Count: count, After: after})
				return nil, nil
			}),
		"target/heal": script.Command(
			script.CmdUsage{Summary: "Remove the faults of a key, or all", Args: "[key]", Flags: nameFlag},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				key := ""
				if len(args) > 0 {
					key = args[0]
				}
				f.target(cmdName(s)).Heal(key)
				return nil, nil
			}),
		"target/set": script.Command(
			script.CmdUsage{Summary: "Put a value straight into the target", Args: "key value", Flags: nameFlag},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) != 2 {
					return nil, script.ErrUsage
				}
				f.target(cmdName(s)).Set(args[0], args[1])
				return nil, nil
			}),
		"target/show": script.Command(
			script.CmdUsage{Summary: "Print the target's contents, one key=value a line", Flags: nameFlag},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				state := f.target(cmdName(s)).State()
				var b strings.Builder
				for _, k := range slices.Sorted(maps.Keys(state)) {
					fmt.Fprintf(&b, "%s=%s\n", k, state[k])
				}
				return func(*script.State) (string, string, error) { return b.String(), "", nil }, nil
			}),
		"target/ops": script.Command(
			script.CmdUsage{Summary: "Print the target's operations so far", Flags: nameFlag},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				ops := f.target(cmdName(s)).History()
				return func(*script.State) (string, string, error) { return strings.Join(ops, "\n") + "\n", "", nil }, nil
			}),
		"target/clear": script.Command(
			script.CmdUsage{Summary: "Forget the target's operations so far (target/ops prints the later ones)", Flags: nameFlag},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				f.target(cmdName(s)).ClearHistory()
				f.marks[cmdName(s)] = 0
				return nil, nil
			}),
		"target/mark": script.Command(
			script.CmdUsage{
				Summary: "Make the next target/expect look only at operations that end from now on",
				Flags:   nameFlag,
			},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				f.marks[cmdName(s)] = f.target(cmdName(s)).Mark()
				return nil, nil
			}),
		"target/expect": script.Command(
			script.CmdUsage{
				Summary: "Wait for the next operations of the target, and check they are these",
				Args:    "op...",
				Detail: []string{
					"Looks at the operations that ended after the mark: the start, target/clear,",
					"target/mark, or the operations the last target/expect matched. The first",
					"len(op) of them must be op, in this order; it fails as soon as they are not.",
					"The mark then moves past them, so each operation is checked once.",
					"--any-order lets different keys' operations end in any order (each key's",
					"still in order): only for operations the reconciler runs at once or in one",
					"round, whose order across keys it does not define.",
					"--skip passes over leading operations it matches in full (a healed",
					"fault's last retries, whose number the test cannot know).",
				},
				Flags: withName(func(fs *pflag.FlagSet) {
					fs.Duration("timeout", 5*time.Second, "how long to wait")
					fs.Bool("any-order", false, "operations on different keys may end in any order")
					fs.String("skip", "", "regexp: pass over leading operations it matches in full")
				}),
			},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				if len(args) == 0 {
					return nil, script.ErrUsage
				}
				timeout, _ := s.Flags.GetDuration("timeout")
				anyOrder, _ := s.Flags.GetBool("any-order")
				skip, _ := s.Flags.GetString("skip")
				m := fake.Match{AnyOrder: anyOrder}
				if skip != "" {
					re, err := regexp.Compile(skip)
					if err != nil {
						return nil, fmt.Errorf("--skip: %w", err)
					}
					m.Skip = re
				}
				ctx, cancel := context.WithTimeout(s.Context(), timeout)
				defer cancel()
				tgt := f.target(cmdName(s))
				next, err := tgt.Expect(ctx, f.marks[cmdName(s)], args, m)
				if err != nil {
					return nil, err
				}
				f.marks[cmdName(s)] = next
				if o := tgt.Overlaps(); len(o) > 0 {
					return nil, fmt.Errorf("overlapping operations on %v", o)
				}
				return nil, nil
			}),
	}
}

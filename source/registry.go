package source

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/script"
	"github.com/spf13/pflag"
)

// Cell provides the Registry of the application's sources and the
// source/status and source/resync script commands, for txtar tests and the
// hive shell. Sources register themselves when Params carries the
// Registry, which is the case whenever this cell is in the hive.
var Cell = cell.Module(
	"source",
	"Registry and script commands of the sources",
	cell.Provide(NewRegistry, (*Registry).ScriptCommands),
)

// Registry knows every source constructed with Params that carry it.
type Registry struct {
	mu   sync.Mutex
	byID map[string]Source
}

// NewRegistry returns an empty registry. Cell provides one.
func NewRegistry() *Registry { return &Registry{byID: map[string]Source{}} }

func (reg *Registry) add(id ID, s Source) error {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	name := id.DisplayName()
	if _, dup := reg.byID[name]; dup {
		return fmt.Errorf("%w: a source named %q already exists in module %q", ErrInvalidConfig, id.Name, id.ModuleID)
	}
	reg.byID[name] = s
	return nil
}

// lookup finds sources by display name or Config.Name; "" matches all.
func (reg *Registry) lookup(name string) ([]Source, error) {
	reg.mu.Lock()
	defer reg.mu.Unlock()
	names := slices.Sorted(maps.Keys(reg.byID))
	var found []Source
	for _, display := range names {
		i := strings.LastIndex(display, "/")
		if name == "" || name == display || name == display[i+1:] {
			found = append(found, reg.byID[display])
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no source %q (have: %s)", name, strings.Join(names, ", "))
	}
	return found, nil
}

// Statuses returns the status of every registered source, sorted by
// display name.
func (reg *Registry) Statuses() []StatusSnapshot {
	ss, _ := reg.lookup("")
	out := make([]StatusSnapshot, len(ss))
	for i, s := range ss {
		out[i] = s.Status()
	}
	return out
}

// ScriptCommands returns the source/... script commands: status [name]
// [--json], resync [name] and initialize [name].
func (reg *Registry) ScriptCommands() hive.ScriptCmdsOut {
	return hive.NewScriptCmds(map[string]script.Cmd{
		"source/status": reg.statusCmd(),
		"source/initialize": script.Command(
			script.CmdUsage{Summary: "Mark the table initialized although items fail (the reconciler may then prune their objects)", Args: "[name]"},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				ss, err := reg.lookupArgs(args)
				if err != nil {
					return failed(err)
				}
				for _, src := range ss {
					src.InitializeAnyway()
				}
				return nil, nil
			}),
		"source/resync": script.Command(
			script.CmdUsage{Summary: "List again now (unchanged items write nothing)", Args: "[name]"},
			func(s *script.State, args ...string) (script.WaitFunc, error) {
				ss, err := reg.lookupArgs(args)
				if err != nil {
					return failed(err)
				}
				for _, src := range ss {
					src.Resync()
				}
				return nil, nil
			}),
	})
}

// failed reports err as the command's failure and on its stderr, so that
// scripts can match the message.
func failed(err error) (script.WaitFunc, error) {
	if errors.Is(err, script.ErrUsage) {
		return nil, err
	}
	return func(*script.State) (string, string, error) { return "", err.Error() + "\n", err }, nil
}

func (reg *Registry) lookupArgs(args []string) ([]Source, error) {
	switch len(args) {
	case 0:
		return reg.lookup("")
	case 1:
		return reg.lookup(args[0])
	}
	return nil, script.ErrUsage
}

func (reg *Registry) statusCmd() script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Show what the sources are doing",
			Args:    "[name]",
			Flags:   func(fs *pflag.FlagSet) { fs.Bool("json", false, "print the snapshots as JSON") },
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			asJSON, err := s.Flags.GetBool("json")
			if err != nil {
				return nil, err
			}
			ss, err := reg.lookupArgs(args)
			if err != nil {
				return failed(err)
			}
			snaps := make([]StatusSnapshot, len(ss))
			for i, src := range ss {
				snaps[i] = src.Status()
			}
			var b strings.Builder
			if asJSON {
				enc := json.NewEncoder(&b)
				enc.SetIndent("", "  ")
				if err := enc.Encode(snaps); err != nil {
					return nil, err
				}
			} else {
				WriteStatusTable(&b, snaps)
			}
			out := b.String()
			return func(*script.State) (string, string, error) { return out, "", nil }, nil
		})
}

// WriteStatusTable writes snapshots for humans: one row per source, then
// the failing items and last error of each unhealthy one.
func WriteStatusTable(w io.Writer, snaps []StatusSnapshot) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "Source\tTable\tState\tItems\tObjects\tEvents\tUpserts\tDeletes\tRelists\tLastRelist\tLag\tHealth")
	for _, s := range snaps {
		last := "never"
		if !s.LastRelist.At.IsZero() {
			last = fmt.Sprintf("%s (%d items, %d written, %d deleted)", s.LastRelist.Reason, s.LastRelist.Items, s.LastRelist.Upserts, s.LastRelist.Deletes)
		}
		health := "OK"
		if !s.Healthy() {
			health = "Degraded"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\n",
			s.DisplayName(), s.Table, s.State, s.Items, s.Objects, s.Events, s.Upserts, s.Deletes, s.Relists,
			last, s.Lag.Round(time.Millisecond), health)
	}
	tw.Flush()
	for _, s := range snaps {
		if !s.Healthy() {
			fmt.Fprintf(w, "\n%s: %s\n", s.DisplayName(), s.HealthMessage())
		}
	}
}

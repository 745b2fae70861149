package reconciler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/script"
	"github.com/spf13/pflag"
)

// ScriptCommands returns the reconciler/... script commands. Cell provides
// them to the hive; every command takes an optional reconciler name (its
// Config.Name or "<module>/<name>"); without one it applies to all.
func (reg *Registry) ScriptCommands() hive.ScriptCmdsOut {
	return hive.NewScriptCmds(map[string]script.Cmd{
		"reconciler/status":  reg.statusCmd(),
		"reconciler/full":    reg.simpleCmd("Trigger a full reconciliation (prune, then refresh)", controlled.TriggerFullReconciliation),
		"reconciler/suspend": reg.simpleCmd("Suspend: start no operation until resumed", controlled.Suspend),
		"reconciler/resume":  reg.simpleCmd("Resume a suspended reconciler", controlled.Resume),
		"reconciler/wait":    reg.waitCmd(),
		"reconciler/explain": reg.explainCmd(),
	})
}

func nameArg(args []string) (string, error) {
	switch len(args) {
	case 0:
		return "", nil
	case 1:
		return args[0], nil
	default:
		return "", script.ErrUsage
	}
}

func (reg *Registry) simpleCmd(summary string, fn func(controlled)) script.Cmd {
	return script.Command(
		script.CmdUsage{Summary: summary, Args: "[name]"},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			name, err := nameArg(args)
			if err != nil {
				return nil, err
			}
			rs, err := reg.lookup(name)
			if err != nil {
				return failed(err)
			}
			for _, r := range rs {
				fn(r)
			}
			return nil, nil
		})
}

func (reg *Registry) waitCmd() script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Wait until every change so far is reconciled, deletes and retries included",
			Args:    "[name]",
			Flags: func(fs *pflag.FlagSet) {
				fs.Duration("timeout", 10*time.Second, "give up after this long")
			},
			Detail: []string{
				"Waits until every change to the table made before the command",
				"has been reconciled successfully or given up on (a permanent",
				"error or MaxRetries), and no retry for it is pending.",
			},
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			name, err := nameArg(args)
			if err != nil {
				return nil, err
			}
			timeout, err := s.Flags.GetDuration("timeout")
			if err != nil {
				return nil, err
			}
			rs, err := reg.lookup(name)
			if err != nil {
				return failed(err)
			}
			ctx, cancel := context.WithTimeout(s.Context(), timeout)
			defer cancel()
			for _, r := range rs {
				if err := r.waitSettled(ctx); err != nil {
					return nil, fmt.Errorf("%s: %w", r.Status().DisplayName(), err)
				}
			}
			return nil, nil
		})
}

func (reg *Registry) statusCmd() script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Show what the reconcilers are doing",
			Args:    "[name]",
			Flags: func(fs *pflag.FlagSet) {
				fs.Bool("json", false, "print the status snapshots as JSON")
			},
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			name, err := nameArg(args)
			if err != nil {
				return nil, err
			}
			asJSON, err := s.Flags.GetBool("json")
			if err != nil {
				return nil, err
			}
			rs, err := reg.lookup(name)
			if err != nil {
				return failed(err)
			}
			snaps := make([]StatusSnapshot, len(rs))
			for i, r := range rs {
				snaps[i] = r.Status()
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

// failed reports err as the command's failure and on its stderr, so that
// scripts can match the message.
func failed(err error) (script.WaitFunc, error) {
	return func(*script.State) (string, string, error) { return "", err.Error() + "\n", err }, nil
}

// DisplayName is the reconciler's name in commands and logs.
func (s StatusSnapshot) DisplayName() string {
	return ReconcilerID{ModuleID: s.Module, Name: s.Name}.DisplayName()
}

// WriteStatusTable writes snapshots as a table for humans: one row per
// reconciler, then the recent errors of each.
func WriteStatusTable(w io.Writer, snaps []StatusSnapshot) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "Reconciler\tTable\tPending\tRefreshing\tDone\tError\tUnset\tRetries\tInFlight\tOldest\tRealized p50/p99\tLastRound\tLastFull\tState")
	for _, s := range snaps {
		state := "running"
		switch {
		case s.Suspended:
			state = "suspended"
		case !s.Initialized:
			state = "running, table not initialized"
		}
		lastFull := "never"
		if !s.LastFull.At.IsZero() {
			lastFull = fmt.Sprintf("%s ago in %s", roundDur(s.UpdatedAt.Sub(s.LastFull.At)), roundDur(s.LastFull.Duration))
			if s.LastFull.Error != "" {
				lastFull += " (failed)"
			}
		}
		lastRound := "never"
		if !s.LastRound.At.IsZero() {
			lastRound = fmt.Sprintf("%d objects in %s", s.LastRound.Objects, roundDur(s.LastRound.Duration))
		}
		realized := "-"
		if s.Realization.Samples > 0 {
			realized = fmt.Sprintf("%s/%s", roundDur(s.Realization.P50), roundDur(s.Realization.P99))
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\n",
			s.DisplayName(), s.Table,
			s.Objects.Pending, s.Objects.Refreshing, s.Objects.Done, s.Objects.Error, s.Objects.Unset,
			s.Retries, s.InFlight, roundDur(s.OldestWaiting), realized, lastRound, lastFull, state)
	}
	tw.Flush()
	for _, s := range snaps {
		if len(s.RecentErrors) == 0 && s.LastFull.Error == "" {
			continue
		}
		fmt.Fprintf(w, "\nRecent errors of %s:\n", s.DisplayName())
		if s.LastFull.Error != "" {
			fmt.Fprintf(w, "  prune: %s\n", s.LastFull.Error)
		}
		for _, e := range s.RecentErrors {
			fmt.Fprintf(w, "  %s %s: %s\n", e.At.Format(time.TimeOnly), e.Key, e.Error)
		}
	}
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d > time.Minute:
		return d.Round(time.Second)
	case d > time.Second:
		return d.Round(10 * time.Millisecond)
	default:
		return d.Round(time.Microsecond)
	}
}

func (reg *Registry) explainCmd() script.Cmd {
	return script.Command(
		script.CmdUsage{
			Summary: "Explain where a key stands, and why it is not Done",
			Args:    "key",
			Flags: func(fs *pflag.FlagSet) {
				fs.String("reconciler", "", "only this reconciler (its Config.Name or <module>/<name>); default: all")
				fs.String("until", "", "wait until the key is in this state (Done, Absent, Retrying, ...) before printing")
				fs.Duration("timeout", 10*time.Second, "with --until: give up after this long")
			},
			Detail: []string{
				"The key is the primary key as db/show prints it. For each reconciler",
				"it prints the key's state and since when, why, the last error, the",
				"next attempt and the revision that asked.",
			},
		},
		func(s *script.State, args ...string) (script.WaitFunc, error) {
			if len(args) != 1 {
				return nil, script.ErrUsage
			}
			name, _ := s.Flags.GetString("reconciler")
			until, _ := s.Flags.GetString("until")
			timeout, _ := s.Flags.GetDuration("timeout")
			var want *KeyState
			if until != "" {
				st, err := ParseKeyState(until)
				if err != nil {
					return failed(err)
				}
				want = &st
			}
			rs, err := reg.lookup(name)
			if err != nil {
				return failed(err)
			}
			ctx, cancel := context.WithTimeout(s.Context(), timeout)
			defer cancel()
			var b strings.Builder
			for _, r := range rs {
				e, err := explainUntil(ctx, r, args[0], want)
				if err != nil {
					return failed(err)
				}
				b.WriteString(e.String())
			}
			out := b.String()
			return func(*script.State) (string, string, error) { return out, "", nil }, nil
		})
}

// explainUntil explains key, waiting first (with want set) until it is in
// state *want.
func explainUntil(ctx context.Context, r controlled, key string, want *KeyState) (Explanation, error) {
	for {
		e, err := r.explainText(ctx, key)
		if err != nil || want == nil || e.State == *want {
			return e, err
		}
		select {
		case <-ctx.Done():
			return e, fmt.Errorf("%s: %q is %s, not %s: %w\n%s", e.Reconciler, e.Key, e.State, *want, ctx.Err(), e)
		case <-e.Changed:
		}
	}
}

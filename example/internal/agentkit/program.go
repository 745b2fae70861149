package agentkit

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/hive/shell"
	"github.com/cilium/statedb"
	"github.com/spf13/cobra"

	"github.com/converge-go/converge/health"
	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

// BaseCells are the cells every example agent is built on, besides its
// own module: the database, jobs, health for /healthz, converge's registry
// and its Prometheus metrics.
func BaseCells() []cell.Cell {
	return []cell.Cell{
		statedb.Cell,    // the in-memory database and its db/... shell commands
		job.Cell,        // background jobs that start and stop with the hive
		health.Cell,     // cell.Health, read by /healthz and the shell's "health"
		reconciler.Cell, // converge's registry and reconciler/... shell commands
		metrics.Cell,    // converge's Prometheus metrics and reconciler/metrics
	}
}

// NewHive returns a hive of cells that logs only slow start and stop hooks
// (the default logs every one of them at Info).
func NewHive(cells ...cell.Cell) *hive.Hive {
	opts := hive.DefaultOptions()
	opts.LogThreshold = 100 * time.Millisecond
	return hive.NewWithOptions(opts, slices.Clone(cells)...)
}

// Program describes an agent's command line.
type Program struct {
	Name, Short, Long string
	// Shell adds "NAME shell", which runs a command in the shell of the
	// running agent (whose cells include ShellCell(Name)), or opens it
	// when given none. It connects to DefaultShellSocket(Name), or to
	// --shell-sock-path. Greeting is what the shell says first.
	Shell    bool
	Greeting string
}

// Main runs h as the program: it starts the hive, waits for SIGINT or
// SIGTERM and stops it. The subcommands are "hive" (what the hive is made
// of) and, with Shell, "shell". It exits with status 1 on failure.
func Main(h *hive.Hive, p Program) {
	cmd := &cobra.Command{
		Use:          p.Name,
		Short:        p.Short,
		Long:         p.Long,
		SilenceUsage: true,
		RunE:         func(*cobra.Command, []string) error { return h.Run(slog.Default()) },
	}
	h.RegisterFlags(cmd.Flags())
	cmd.AddCommand(h.Command())
	if p.Shell {
		greeting := func(w io.Writer) { fmt.Fprintln(w, p.Greeting) }
		sc := shell.ShellCmd(DefaultShellSocket(p.Name), p.Name+"> ", greeting)
		sc.PreRunE = func(c *cobra.Command, _ []string) error {
			path, err := c.Flags().GetString(shell.ShellSockPathName)
			if err != nil {
				return err
			}
			return checkShellSocket(path)
		}
		cmd.AddCommand(sc)
	}
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}

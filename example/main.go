package main

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

	"github.com/converge-go/converge/example/internal/agentkit"
	"github.com/converge-go/converge/metrics"
	"github.com/converge-go/converge/reconciler"
)

// defaultShellSocket is where the running agent serves the hive shell
// (flag --shell-sock-path), next to the state directory. "go run ./example
// shell" connects to it.
const defaultShellSocket = "example-shell.sock"

// exampleCell is the application: the table of desired files, its
// reconciler, the desired-state file and the HTTP server.
var exampleCell = cell.Module(
	"example",
	"Keeps a directory in sync with a table of desired files",

	cell.Config(defaultConfig),
	cell.Invoke(Config.validate),

	// The module's job group, in which the reconciler runs; its jobs
	// report health under the module's cell.Health.
	cell.ProvidePrivate(job.Registry.NewGroup),

	cell.ProvidePrivate(
		newFilesTable, // statedb.RWTable[*File]: only this module writes
		newFileOps,
		newDesiredState,
	),
	// Public, so that other cells (and the test) can read the table and
	// wait on the reconciler.
	cell.Provide(
		statedb.RWTable[*File].ToTable,
		newFileReconciler,
		newServer,
	),

	// Cells are constructed only when something needs them: the server
	// needs the desired state, and the reconciler needs nothing of ours,
	// so ask for both.
	cell.Invoke(func(*agentkit.Server, reconciler.Reconciler[*File]) {}),
)

// cells are the whole application; newHive builds the hive from them.
var cells = []cell.Cell{
	statedb.Cell,        // the in-memory database and its db/... shell commands
	job.Cell,            // background jobs that start and stop with the hive
	agentkit.HealthCell, // cell.Health, read by /healthz
	reconciler.Cell,     // converge's registry and reconciler/... shell commands
	metrics.Cell,        // converge's Prometheus metrics and reconciler/metrics
	shell.ServerCell(defaultShellSocket),
	exampleCell,
}

// newHive returns the application's hive, with extra cells added (the
// test adds one that captures objects to drive it).
func newHive(extra ...cell.Cell) *hive.Hive {
	opts := hive.DefaultOptions()
	// Log start and stop hooks only when they are slow: the default logs
	// every one of them at Info.
	opts.LogThreshold = 100 * time.Millisecond
	return hive.NewWithOptions(opts, append(slices.Clone(cells), extra...)...)
}

func main() {
	h := newHive()
	cmd := &cobra.Command{
		Use:   "example",
		Short: "Keep a directory in sync with a table of desired files",
		Long: "Keeps --state-dir in sync with a table of desired files that an HTTP API\n" +
			"changes, using converge's reconciler. See the package documentation.",
		SilenceUsage: true,
		RunE: func(*cobra.Command, []string) error {
			// Run starts the hive, waits for SIGINT or SIGTERM, and stops
			// it: the reconciler's in-flight operation is cancelled, the
			// HTTP server finishes its requests.
			return h.Run(slog.Default())
		},
	}
	h.RegisterFlags(cmd.Flags())
	cmd.AddCommand(
		// "example shell [command]": the hive shell of a running agent.
		shell.ShellCmd(defaultShellSocket, "example> ", greeting),
		// "example hive": what the hive is made of.
		h.Command(),
	)
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}

func greeting(w io.Writer) {
	fmt.Fprintln(w, "converge example shell: try reconciler/status, db/show desired-files, health, help")
}

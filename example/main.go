package main

import (
	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/example/internal/agentkit"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

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

	// The manifests directory (--desired-dir), a second writer of the
	// table; see manifests.go.
	manifestsCell,
)

// newHive returns the application's hive, with extra cells added (the
// test adds one that captures objects to drive it).
func newHive(extra ...cell.Cell) *hive.Hive {
	cells := append(agentkit.BaseCells(), agentkit.ShellCell("example"), source.Cell, source.PrometheusCell, exampleCell)
	return agentkit.NewHive(append(cells, extra...)...)
}

func main() {
	agentkit.Main(newHive(), agentkit.Program{
		Name:  "example",
		Short: "Keep a directory in sync with a table of desired files",
		Long: "Keeps --state-dir in sync with a table of desired files that an HTTP API\n" +
			"changes, using converge's reconciler. See the package documentation.",
		Shell:    true,
		Greeting: "converge example shell: try reconciler/status, db/show desired-files, health, help",
	})
}

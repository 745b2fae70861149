package main

import (
	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/example/internal/agentkit"
	"github.com/converge-go/converge/reconciler"
)

// firewallCell is the application: the table of desired rules, its
// reconciler, the nft target and the HTTP server.
var firewallCell = cell.Module(
	"firewall",
	"Keeps an nftables table in sync with a table of allowed ports",

	cell.Config(defaultConfig),
	cell.Invoke(Config.validate),

	// The module's job group, in which the reconciler runs; its jobs
	// report health under the module's cell.Health.
	cell.ProvidePrivate(job.Registry.NewGroup),

	cell.ProvidePrivate(
		newDesiredRules,
		newTarget,
	),
	// Public, so that other cells (and the test) can read the table and
	// wait on the reconciler. The table is writable by them too: in a
	// larger agent, rules come from more than the API, and the reconciler
	// reports a rule it cannot apply on that rule alone.
	cell.Provide(
		newRulesTable,
		statedb.RWTable[*Rule].ToTable,
		newFirewallReconciler,
		newServer,
	),

	// Cells are constructed only when something needs them: ask for the
	// server and the reconciler.
	cell.Invoke(func(*agentkit.Server, reconciler.Reconciler[*Rule]) {}),
)

// newHive returns the application's hive, with extra cells added (the
// test adds one that captures objects to drive it).
func newHive(extra ...cell.Cell) *hive.Hive {
	cells := append(agentkit.BaseCells(), agentkit.ShellCell("firewall"), firewallCell)
	return agentkit.NewHive(append(cells, extra...)...)
}

func main() {
	agentkit.Main(newHive(), agentkit.Program{
		Name:  "firewall",
		Short: "Keep an nftables table in sync with a table of allowed ports",
		Long: "Keeps the nftables table inet converge_firewall, in a private network namespace\n" +
			"(or --netns), in sync with a table of allowed ports that an HTTP API changes,\n" +
			"using converge's whole-set reconciler. Needs root. See the package documentation.",
		Shell:    true,
		Greeting: "converge firewall shell: try reconciler/status, db/show desired-rules, health, help",
	})
}

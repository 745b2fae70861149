package main

import (
	"log/slog"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// target is where the ruleset goes: nft, run in the network namespace.
type target struct {
	ns  *netns
	nft nftRunner
}

// newTarget finds nft and creates (or, with --netns, opens) the network
// namespace, when the hive starts: both fail with what is missing. The
// namespace is let go of when the hive stops, after the reconciler: the
// reconciler's job joins the lifecycle in newFirewallReconciler, which
// needs the target and so runs after this constructor has added its hook,
// and stop hooks run in reverse. Were it otherwise, Close would still
// wait for a running nft, and a later one would fail with
// errNamespaceClosed.
func newTarget(lc cell.Lifecycle, log *slog.Logger, cfg Config) (*target, error) {
	path, err := findNft(cfg.Nft)
	if err != nil {
		return nil, err
	}
	var ns *netns
	if cfg.Netns == "" {
		ns, err = newPrivateNetns()
	} else {
		ns, err = openNetns(cfg.Netns)
	}
	if err != nil {
		return nil, err
	}
	log.Info("Keeping the nftables table in a network namespace",
		"table", tableFamily+" "+tableName, "netns", ns.Path(), "private", cfg.Netns == "", "nft", path)
	lc.Append(cell.Hook{OnStop: func(cell.HookContext) error { return ns.Close() }})
	return &target{ns: ns, nft: &nftCmd{path: path, ns: ns}}, nil
}

// newFirewallReconciler starts converge's reconciler in its whole-set
// shape on the desired-rules table, with the firewall as its target. It
// runs as a job of the module's job group: it starts and stops with the
// hive, reports its health there, and registers with reconciler.Cell's
// registry for /status and the reconciler/... shell commands.
func newFirewallReconciler(t *target, cfg Config, log *slog.Logger, p reconciler.Params, rules statedb.RWTable[*Rule]) (reconciler.Reconciler[*Rule], error) {
	fw := &firewall{nft: t.nft, policy: cfg.InputPolicy, log: log}
	return reconciler.New(reconciler.Config[*Rule]{
		Table:           rules,
		GetObjectStatus: getStatus,
		SetObjectStatus: setStatus,
		CloneObject:     (*Rule).Clone,
		SyncOperations:  fw,

		// The default debounce: a burst of PUTs becomes one Sync,
		// 100ms after the last of them (at most a second after the
		// first). One nft costs the same for one rule as for a thousand.

		// Every full reconciliation loads the whole ruleset again, which
		// undoes whatever was changed in the table behind our back. The
		// table is small and the load atomic, so a few seconds is cheap.
		FullReconciliationInterval: cfg.FullReconciliationInterval,

		// A failed load (nft missing, the namespace gone) is retried
		// from 100ms on, doubling, but at least once per full
		// reconciliation interval.
		RetryBackoffMax: cfg.FullReconciliationInterval,
	}, p)
}

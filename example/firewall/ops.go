package main

import (
	"context"
	"fmt"
	"iter"
	"log/slog"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// firewall makes the nftables table match the desired-rules table. It
// implements reconciler.SyncOperations: every Sync renders the whole
// ruleset from one snapshot and loads it with one nft -f, which nft
// applies atomically. The reconciler calls Sync once at start, after
// changes (debounced), at every full reconciliation and on
// TriggerFullReconciliation, never two at once.
type firewall struct {
	nft    nftRunner
	policy string
	log    *slog.Logger
}

var _ reconciler.SyncOperations[*Rule] = (*firewall)(nil)

// Sync implements reconciler.SyncOperations. It ignores changes: the
// ruleset is rendered whole each time, which is also what repairs drift,
// since loading it replaces whatever the table holds.
//
// A rule that fails validation, or that nft rejects, is left out and
// failed alone (reconciler.FailObjects) with a Permanent error: it is not
// retried until it changes. The others are applied. An error that is no
// rule's (nft missing, the namespace gone, the base ruleset rejected)
// fails the whole Sync, which is retried with backoff.
func (f *firewall) Sync(ctx context.Context, _ statedb.ReadTxn, desired iter.Seq2[*Rule, statedb.Revision], _ iter.Seq[reconciler.Change[*Rule]]) error {
	failures, err := f.apply(ctx, desired)
	if err != nil {
		return err
	}
	return reconciler.FailObjects(failures...)
}

// apply does Sync's work: it loads the ruleset of the desired rules that
// pass validation and nft's check, and returns a failure for each of the
// others. An error is the whole Sync's.
func (f *firewall) apply(ctx context.Context, desired iter.Seq2[*Rule, statedb.Revision]) ([]reconciler.ObjectFailure[*Rule], error) {
	var rules []*Rule
	var failures []reconciler.ObjectFailure[*Rule]
	for r := range desired {
		if err := r.Validate(); err != nil {
			failures = append(failures, reconciler.ObjectFailure[*Rule]{Object: r, Err: reconciler.Permanent(err)})
			continue
		}
		rules = append(rules, r)
	}
	rules, rejected, err := f.check(ctx, rules)
	if err != nil {
		return nil, err
	}
	failures = append(failures, rejected...)
	rs := render(f.policy, rules)
	if _, err := f.nft.Run(ctx, rs.text, "-f", "-"); err != nil {
		return nil, fmt.Errorf("apply the ruleset: %w", err)
	}
	f.log.Debug("Applied the ruleset", "rules", len(rules), "failed", len(failures))
	return failures, nil
}

// check has nft check the ruleset of rules (nft -c: parsed and checked by
// the kernel, not applied) and leaves out the rules it rejects, until the
// rest passes. It returns the rules that pass and a failure for each one
// left out. Each round leaves out at least one rule or ends, so it ends.
func (f *firewall) check(ctx context.Context, rules []*Rule) (ok []*Rule, rejected []reconciler.ObjectFailure[*Rule], err error) {
	for {
		rs := render(f.policy, rules)
		_, err := f.nft.Run(ctx, rs.text, "-c", "-f", "-")
		if err == nil {
			return rules, rejected, nil
		}
		if ctx.Err() != nil {
			return nil, nil, err
		}
		bad := rs.locate(err)
		if len(bad) == 0 {
			// nft named no line of a rule: find the rules it rejects on
			// their own.
			if bad, err = f.isolate(ctx, rules, err); err != nil {
				return nil, nil, err
			}
		}
		var kept []*Rule
		for _, r := range rules { // in order, not the map's
			msg, isBad := bad[r]
			if !isBad {
				kept = append(kept, r)
				continue
			}
			rejected = append(rejected, reconciler.ObjectFailure[*Rule]{
				Object: r,
				Err:    reconciler.Permanent(fmt.Errorf("nft rejects rule %s: %s", r.Name, msg)),
			})
		}
		rules = kept
	}
}

// isolate checks each rule on its own with the base ruleset, and returns
// the rules nft rejects with its messages. It is the fallback for an error
// nft gives without the line of a rule (whole, the error of the whole
// ruleset), so it costs one nft per rule only then. If the base ruleset
// alone fails, or no rule fails alone (rules that fail only together), it
// fails.
func (f *firewall) isolate(ctx context.Context, rules []*Rule, whole error) (map[*Rule]string, error) {
	if _, err := f.nft.Run(ctx, render(f.policy, nil).text, "-c", "-f", "-"); err != nil {
		return nil, fmt.Errorf("check the base ruleset: %w", err)
	}
	bad := map[*Rule]string{}
	for _, r := range rules {
		_, err := f.nft.Run(ctx, render(f.policy, []*Rule{r}).text, "-c", "-f", "-")
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			bad[r] = nftMessages(err)
		}
	}
	if len(bad) == 0 {
		return nil, fmt.Errorf("check the ruleset: nft rejects it, but no rule on its own: %w", whole)
	}
	return bad, nil
}

package main

import (
	"fmt"
	"io"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// handover measures issue 20's "graceful handover of a slot" row. Three
// in-process replicas (real reconcilers, Concurrency 16, a 10 ms target)
// reconcile a steady churn of changes, so operations are in flight on the
// slots that move. A fourth replica joins, then stops cleanly, o.handoverCycles
// times. For every slot that moves, the sample is the time from the start
// of the handover until the harness sees the new owner's claim in etcd:
// for a join, from the joiner's member key appearing (the old owners
// learn of it, drain the slot's operations and release it); for a clean
// stop, from the call to stop (the leaver drains, then revokes its lease).
func handover(o options, cli *clientv3.Client, log io.Writer) ([]row, error) {
	const patience = 60 * time.Second
	f := newFleet(cli, "/bench/handover", o, o.handoverObjects, o.delay)
	defer f.stopAll()
	g, err := watchGroup(cli, f.prefix, o.slots)
	if err != nil {
		return nil, err
	}
	defer g.stop()
	base := []string{"a", "b", "c"}
	for _, name := range base {
		if err := f.add(name); err != nil {
			return nil, err
		}
	}
	if err := g.waitFor(patience, g.balanced(base...)); err != nil {
		return nil, err
	}
	if err := f.waitSettled(patience); err != nil {
		return nil, err
	}
	f.startChurn(o.handoverChurn)

	var joins, leaves []time.Duration
	var joinWrites, leaveWrites []int64
	var heldAtStop, neverReleased int64
	var toRelease, toClaim []time.Duration // a join: joined -> released -> claimed
	for i := range o.handoverCycles {
		_, seen := g.claimsSince(0)
		rev0, err := revisionOf(cli)
		if err != nil {
			return nil, err
		}
		if err := f.add("d"); err != nil {
			return nil, err
		}
		if err := g.waitFor(patience, g.balanced("a", "b", "c", "d")); err != nil {
			return nil, fmt.Errorf("join %d: %w", i+1, err)
		}
		rev1, err := revisionOf(cli)
		if err != nil {
			return nil, err
		}
		joinWrites = append(joinWrites, rev1-rev0)
		joined, _ := g.memberSeen("d")
		evs, seen := g.claimsSince(seen)
		joins = append(joins, since(evs, joined, func(owner string) bool { return owner == "d" })...)
		// Split each join's handover at the old owner's release.
		for _, ev := range evs {
			if freed, ok := g.freedAt(ev.slot); ok && ev.owner == "d" && freed.After(joined) {
				toRelease = append(toRelease, freed.Sub(joined))
				toClaim = append(toClaim, ev.at.Sub(freed))
			}
		}

		left := time.Now()
		st, err := f.remove("d")
		if err != nil {
			return nil, err
		}
		heldAtStop += st.heldBefore
		neverReleased += st.heldAfter
		if err := g.waitFor(patience, g.balanced(base...)); err != nil {
			return nil, fmt.Errorf("leave %d: %w", i+1, err)
		}
		rev2, err := revisionOf(cli)
		if err != nil {
			return nil, err
		}
		leaveWrites = append(leaveWrites, rev2-rev1)
		evs, _ = g.claimsSince(seen)
		leaves = append(leaves, since(evs, left, func(owner string) bool { return owner != "d" })...)
		fmt.Fprintf(log, "handover cycle %d/%d: join p99 %v (%d slots), stop p99 %v (%d slots); at the stop %d operations in flight, %d never released\n",
			i+1, o.handoverCycles, quantile(joins, 0.99), len(joins), quantile(leaves, 0.99), len(leaves), st.heldBefore, st.heldAfter)
	}
	if err := f.stopAll(); err != nil {
		return nil, err
	}
	all := append(append([]time.Duration{}, joins...), leaves...)
	detail := fmt.Sprintf("%d slots moved in %d joins and %d clean stops; p50 %.0f ms; join p99 %.0f ms, stop p99 %.0f ms; 0 overlapping operations",
		len(all), o.handoverCycles, o.handoverCycles, ms(quantile(all, 0.5)), ms(quantile(joins, 0.99)), ms(quantile(leaves, 0.99)))
	detail += fmt.Sprintf("; operations in flight at the stops %d, never released by the stopped reconciler %d", heldAtStop, neverReleased)
	detail += fmt.Sprintf("; joins: old owner released p99 %.0f ms after the join, new owner claimed p99 %.0f ms after the release",
		ms(quantile(toRelease, 0.99)), ms(quantile(toClaim, 0.99)))
	return []row{
		atMost("handover/p99", ms(quantile(all, 0.99)), "ms", 1000, detail),
		{Name: "handover/max", Value: ms(quantile(all, 1)), Unit: "ms"},
		{Name: "handover/etcd-writes-per-join", Value: mean(joinWrites), Unit: "writes",
			Detail: fmt.Sprintf("a fourth replica joins %d slots: member key, drains released, claims, summaries", o.slots)},
		{Name: "handover/etcd-writes-per-stop", Value: mean(leaveWrites), Unit: "writes",
			Detail: "a replica stops cleanly: one lease revoke, then the others' claims and summaries"},
	}, nil
}

// since returns, for every claim by an owner that want accepts, how long
// after start it was seen.
func since(evs []claimEvent, start time.Time, want func(owner string) bool) []time.Duration {
	var out []time.Duration
	for _, ev := range evs {
		if want(ev.owner) {
			out = append(out, ev.at.Sub(start))
		}
	}
	return out
}

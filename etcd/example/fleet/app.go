package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/etcdsource"
	"github.com/converge-go/converge/etcd/leader"
	"github.com/converge-go/converge/etcd/shard"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// options are a replica's settings (its command line).
type options struct {
	name         string
	prefix       string
	leaderOnly   bool
	slots        int
	ttl          time.Duration
	concurrency  int
	callTime     time.Duration
	opTimeout    time.Duration
	ignoreCancel bool
	httpAddr     string
	summaryEvery time.Duration
	// events receives one line per change of the number of owned scopes
	// ("owned N"), for scripts and the fault tests.
	events io.Writer
}

// newHive returns one replica: its table of groups fed from etcd by the
// etcd source, its reconciler whose Ownership is a shard.Manager (or, with
// leaderOnly, a leader.Elector), the fenced fleet target, the job that
// re-applies regained groups, and the HTTP server of the view. extra cells
// go into the fleet module (tests reach the table through them).
func newHive(o options, cli *clientv3.Client, extra ...cell.Cell) *hive.Hive {
	opts := hive.DefaultOptions()
	opts.LogThreshold = 100 * time.Millisecond
	cells := []cell.Cell{
		statedb.Cell, job.Cell, reconciler.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Provide(func() (*clientv3.Client, options) { return cli, o }),
		cell.Provide(func() *reporter { return &reporter{} }),
	}
	cells = append(cells, ownershipCells(o)...)
	cells = append(cells, cell.Module("fleet", "Instance groups applied to the fleet",
		append([]cell.Cell{
			cell.ProvidePrivate(job.Registry.NewGroup, newGroupTable),
			cell.Provide(statedb.RWTable[*Group].ToTable),
			cell.Invoke(registerSource, registerReconciler, registerServer),
		}, extra...)...))
	return hive.NewWithOptions(opts, cells...)
}

// ownershipCells provide the Ownership and the scopes it owns: a
// shard.Manager, or with leaderOnly a leader.Elector.
func ownershipCells(o options) []cell.Cell {
	if o.leaderOnly {
		return []cell.Cell{
			cell.Provide(func(cli *clientv3.Client) leader.Config {
				return leader.Config{Client: cli, Prefix: o.prefix + "/leader", Name: o.name, TTL: o.ttl}
			}),
			leader.Cell,
			cell.Module("leader-view", "Publishes the leader view",
				cell.ProvidePrivate(job.Registry.NewGroup),
				cell.Invoke(func(jobs job.Group, cli *clientv3.Client, e *leader.Elector, rep *reporter) {
					jobs.Add(job.OneShot("publish", func(ctx context.Context, _ cell.Health) error {
						publishLeaderView(ctx, cli, e, o, rep)
						return nil
					}))
				})),
			cell.Provide(func(e *leader.Elector) scopes {
				return scopes{ownership: e, of: func(string) int { return 0 }, owned: func() []int {
					if e.Owns(nil) {
						return []int{0}
					}
					return nil
				}, since: func(int) (time.Time, bool) { return e.TermStarted() }}
			}),
		}
	}
	return []cell.Cell{
		cell.Provide(func(cli *clientv3.Client, rep *reporter) shard.Config {
			return shard.Config{Client: cli, Prefix: o.prefix + "/shards", Name: o.name, Slots: o.slots, TTL: o.ttl,
				RetryInterval: 200 * time.Millisecond, DrainTimeout: o.opTimeout, SummaryInterval: o.summaryEvery,
				Report: rep.report}
		}),
		shard.Cell,
		cell.Provide(func(m *shard.Manager) scopes {
			return scopes{ownership: m, owned: m.Owned, of: func(name string) int { return m.SlotOf([]byte(name)) }, since: m.ClaimedAt}
		}),
	}
}

func registerSource(cli *clientv3.Client, o options, groups statedb.RWTable[*Group], rep *reporter, p source.Params) error {
	desired := o.prefix + "/desired/"
	src, err := etcdsource.New(etcdsource.Config[*Group]{
		Client: cli,
		Prefix: desired,
		Decode: decodeGroup(desired),
		Source: source.Config[etcdsource.KeyValue, *Group]{
			Name:    "desired",
			Table:   groups,
			Equal:   groupsEqual,
			Pending: func(g *Group) *Group { return setGroupStatus(g, reconciler.StatusPending()) },
		},
	}, p)
	if err != nil {
		return err
	}
	rep.src = src
	p.JobGroup.Add(job.OneShot("coverage", func(ctx context.Context, _ cell.Health) error {
		rep.trackCoverage(ctx)
		return nil
	}))
	return nil
}

func registerReconciler(cli *clientv3.Client, o options, groups statedb.RWTable[*Group], sc scopes,
	rep *reporter, jobs job.Group, p reconciler.Params) error {
	target := &fleetTarget{cli: cli, prefix: o.prefix, replica: o.name, callTime: o.callTime,
		ignoreCancel: o.ignoreCancel, acquire: sc.ownership.Acquire, running: map[string]bool{}}
	rec, err := reconciler.New(reconciler.Config[*Group]{
		Name:            "groups",
		Table:           groups,
		GetObjectStatus: groupStatus,
		SetObjectStatus: setGroupStatus,
		CloneObject:     cloneGroup,
		Operations:      target,
		Concurrency:     o.concurrency,
		// The fleet's API answers in CallTime; one that hangs must not
		// keep its group for longer than a handover waits for it.
		OperationTimeout: o.opTimeout,
		// A group refused or failed is tried again within 5 s, not
		// the default minute: another replica may be waiting for it.
		RetryBackoffMax: 5 * time.Second,
		Ownership:       sc.ownership,
	}, p)
	if err != nil {
		return err
	}
	rep.rec.Store(&rec)
	rep.db, rep.groups, rep.sc = p.DB, groups, sc
	jobs.Add(job.OneShot("prune-regained", regainJob(sc, rec.TriggerFullReconciliation)))
	if o.events != nil {
		jobs.Add(job.OneShot("events", func(ctx context.Context, _ cell.Health) error {
			printEvents(ctx, p.DB, groups, sc, o.events)
			return nil
		}))
	}
	return nil
}

// printEvents writes "table ready" once the table holds the desired set
// (a leader-only standby is warm from then on), and "owned N" whenever
// the number of owned scopes changes.
func printEvents(ctx context.Context, db *statedb.DB, groups statedb.Table[*Group], sc scopes, w io.Writer) {
	if init, ready := groups.Initialized(db.ReadTxn()); !init {
		select {
		case <-ready:
		case <-ctx.Done():
			return
		}
	}
	fmt.Fprintln(w, "table ready")
	last := 0
	for {
		changed := sc.ownership.Changed()
		if n := len(sc.owned()); n != last {
			fmt.Fprintf(w, "owned %d\n", n)
			last = n
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

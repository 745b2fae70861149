package main

import (
	"context"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/shard"
	"github.com/converge-go/converge/reconciler"
)

// object is one desired object. Every replica holds the whole desired set
// in its own table (as a source would feed it); each reconciles the keys
// of the slots it owns.
type object struct {
	Key    string
	Value  uint64
	Status reconciler.Status
}

// TableHeader and TableRow make the table printable (statedb's db/show).
func (o *object) TableHeader() []string { return []string{"Key", "Value", "Status"} }

// TableRow is o as a row of TableHeader's columns.
func (o *object) TableRow() []string {
	return []string{o.Key, strconv.FormatUint(o.Value, 10), o.Status.Kind.String()}
}

var objectByKey = statedb.Index[*object, string]{
	Name: "key",
	FromObject: func(o *object) index.KeySet {
		return index.NewKeySet(index.String(o.Key))
	},
	FromKey: index.String,
	Unique:  true,
}

// objectKey is the i-th object's key.
func objectKey(i int) string { return "object-" + strconv.Itoa(i) }

// logger is what replicas log: errors only, on stderr.
var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel()}))

// replicaConfig describes one replica.
type replicaConfig struct {
	cli    *clientv3.Client
	prefix string // the shard group's prefix
	name   string
	slots  int
	ttl    time.Duration

	// summaryInterval is shard.Config.SummaryInterval; 0 is its default.
	summaryInterval time.Duration
	drainTimeout    time.Duration
	concurrency     int
	ops             reconciler.Operations[*object]
}

// replica is one replica of a sharded controller, as an application builds
// it: a hive with its own statedb, a shard.Manager (shard.Cell) and one
// reconciler whose Config.Ownership is that Manager.
type replica struct {
	name  string
	h     *hive.Hive
	db    *statedb.DB
	table statedb.RWTable[*object]
	rec   reconciler.Reconciler[*object]
	mgr   *shard.Manager
	// held counts the operations the reconciler has acquired and not
	// yet released: what a slot's drain waits for.
	held atomic.Int64
}

func newReplica(cfg replicaConfig) (*replica, error) {
	r := &replica{name: cfg.name}
	r.h = hive.New(
		statedb.Cell, job.Cell,
		cell.Provide(func() cell.Health { h, _ := cell.NewSimpleHealth(); return h }),
		cell.Provide(func() shard.Config {
			return shard.Config{
				Client: cfg.cli, Prefix: cfg.prefix, Name: cfg.name, Slots: cfg.slots, TTL: cfg.ttl,
				RetryInterval:   200 * time.Millisecond,
				SummaryInterval: cfg.summaryInterval,
				DrainTimeout:    cfg.drainTimeout,
				Report:          r.report,
			}
		}),
		shard.Cell,
		cell.Module("objects", "Desired objects",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p reconciler.Params, m *shard.Manager) (err error) {
				r.db, r.mgr = db, m
				if r.table, err = statedb.NewTable(db, "objects", objectByKey); err != nil {
					return err
				}
				r.rec, err = reconciler.New(reconciler.Config[*object]{
					Table:           r.table,
					GetObjectStatus: func(o *object) reconciler.Status { return o.Status },
					SetObjectStatus: func(o *object, s reconciler.Status) *object { o.Status = s; return o },
					CloneObject:     func(o *object) *object { c := *o; return &c },
					Operations:      cfg.ops,
					Ownership:       &countedOwnership{Manager: m, held: &r.held},
					Concurrency:     cfg.concurrency,
					Metrics:         reconciler.NopMetrics{},
					// Steady state is what is measured: no periodic
					// full reconciliation or refresh adds work.
					FullReconciliationInterval: reconciler.Off,
					RefreshInterval:            reconciler.Off,
				}, p)
				return err
			}),
		),
	)
	if err := r.h.Populate(logger); err != nil {
		return nil, err
	}
	return r, nil
}

// countedOwnership is the Manager as the reconciler's Ownership, counting
// the operations acquired and not yet released.
type countedOwnership struct {
	*shard.Manager
	held *atomic.Int64
}

// Acquire is the Manager's, with the release counted.
func (c *countedOwnership) Acquire(ctx context.Context, key []byte) (context.Context, func(), bool) {
	opCtx, release, ok := c.Manager.Acquire(ctx, key)
	if !ok {
		return opCtx, release, ok
	}
	c.held.Add(1)
	var once sync.Once
	return opCtx, func() {
		once.Do(func() { c.held.Add(-1) })
		release()
	}, true
}

// report is the replica's shard.Config.Report: its reconciler's counts.
func (r *replica) report() shard.Report {
	st := r.rec.Status()
	return shard.Report{Objects: st.Objects, InFlight: st.InFlight, Retries: st.Retries}
}

func (r *replica) start() error { return r.h.Start(logger, context.Background()) }

// stop stops the hive: the Manager drains its slots and revokes its lease.
func (r *replica) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return r.h.Stop(logger, ctx)
}

// desire inserts objects [from, to) with value v, Pending, in write
// transactions of 1000.
func (r *replica) desire(from, to int, v uint64) {
	for lo := from; lo < to; lo += 1000 {
		w := r.db.WriteTxn(r.table)
		for i := lo; i < min(lo+1000, to); i++ {
			r.table.Insert(w, &object{Key: objectKey(i), Value: v, Status: reconciler.StatusPending()})
		}
		w.Commit()
	}
}

// forget deletes object i.
func (r *replica) forget(i int) {
	w := r.db.WriteTxn(r.table)
	r.table.Delete(w, &object{Key: objectKey(i)})
	w.Commit()
}

// settled reports whether the replica has nothing outstanding: no object
// it owns is Pending, Refreshing or in Error, and no operation runs.
func (r *replica) settled() (done int, ok bool) {
	st := r.rec.Status()
	o := st.Objects
	return o.Done, o.Pending == 0 && o.Refreshing == 0 && o.Error == 0 && st.InFlight == 0 && st.Waiting == 0
}

// logLevel is Error, or Debug with BENCH_DEBUG set in the environment.
func logLevel() slog.Level {
	if os.Getenv("BENCH_DEBUG") != "" {
		return slog.LevelDebug
	}
	return slog.LevelError
}

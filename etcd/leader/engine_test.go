package leader_test

import (
	"context"
	"iter"
	"log/slog"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/etcdcluster"
	"github.com/converge-go/converge/etcd/leader"
	"github.com/converge-go/converge/reconciler"
)

// group is a desired instance group; the target is etcd itself.
type group struct {
	Name   string
	Size   string
	Status reconciler.Status
}

func (g *group) TableHeader() []string { return []string{"Name", "Size", "Status"} }
func (g *group) TableRow() []string    { return []string{g.Name, g.Size, g.Status.Kind.String()} }

var groupByName = statedb.Index[*group, string]{
	Name:       "name",
	FromObject: func(g *group) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.String(g.Name)) },
	FromKey:    statedbindex.String,
	Unique:     true,
}

// etcdTarget writes "/target/<name>" = "<size> by <replica>", fenced.
type etcdTarget struct {
	cli     *clientv3.Client
	replica string
}

func (o *etcdTarget) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, g *group) error {
	return fencing.Do(ctx, o.cli, clientv3.OpPut("/target/"+g.Name, g.Size+" by "+o.replica))
}

func (o *etcdTarget) Delete(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, g *group) error {
	return fencing.Do(ctx, o.cli, clientv3.OpDelete("/target/"+g.Name))
}

func (o *etcdTarget) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*group, statedb.Revision]) error {
	return nil
}

type replica struct {
	h      *hive.Hive
	db     *statedb.DB
	groups statedb.RWTable[*group]
	el     *leader.Elector
	rec    reconciler.Reconciler[*group]
}

// newReplica builds the hive of one replica: its own table, a reconciler
// constructed suspended, governed by the elector, with fenced operations.
func newReplica(t *testing.T, cli *clientv3.Client, name string) *replica {
	r := &replica{}
	r.h = hive.New(
		statedb.Cell, job.Cell,
		cell.Provide(func() cell.Health { h, _ := cell.NewSimpleHealth(); return h }),
		cell.Provide(func() leader.Config {
			return leader.Config{Client: cli, Prefix: "/test/engine", Name: name, TTL: 10 * time.Second, RetryInterval: 100 * time.Millisecond}
		}),
		leader.Cell,
		cell.Module("groups", "Instance groups",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p reconciler.Params, el *leader.Elector) (err error) {
				r.db, r.el = db, el
				if r.groups, err = statedb.NewTable(db, "groups", groupByName); err != nil {
					return err
				}
				r.rec, err = reconciler.New(reconciler.Config[*group]{
					Table:           r.groups,
					GetObjectStatus: func(g *group) reconciler.Status { return g.Status },
					SetObjectStatus: func(g *group, s reconciler.Status) *group { g.Status = s; return g },
					CloneObject:     func(g *group) *group { c := *g; return &c },
					Operations:      leader.Operations(el, &etcdTarget{cli: cli, replica: name}),
					StartSuspended:  true,
				}, p)
				if err == nil {
					el.Govern(r.rec)
				}
				return err
			}),
		),
	)
	if err := r.h.Start(slog.New(slog.DiscardHandler), context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.stop)
	return r
}

func (r *replica) stop() { _ = r.h.Stop(slog.New(slog.DiscardHandler), context.Background()) }

func (r *replica) desire(name, size string) {
	w := r.db.WriteTxn(r.groups)
	r.groups.Insert(w, &group{Name: name, Size: size, Status: reconciler.StatusPending()})
	w.Commit()
}

func (r *replica) settle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := r.rec.WaitUntilSettled(ctx, r.groups.Revision(r.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
}

func targetValue(t *testing.T, cli *clientv3.Client, name string) string {
	t.Helper()
	resp, err := cli.Get(context.Background(), "/target/"+name)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return ""
	}
	return string(resp.Kvs[0].Value)
}

// Two replicas with today's engine: only the leader reconciles; the
// standby, suspended but fed, takes over on the leader's clean stop and
// reconciles at once what changed while it stood by.
func TestLeaderOnlyWithTodaysEngine(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	a := newReplica(t, cli, "a")
	b := newReplica(t, cli, "b")
	first, second := a, b
	waitEither(t, a.el, b.el)
	if b.el.Leading() {
		first, second = b, a
	}
	for _, r := range []*replica{a, b} {
		r.desire("web", "3")
	}
	first.settle(t)
	leaderName := map[*replica]string{a: "a", b: "b"}
	if got := targetValue(t, cli, "web"); got != "3 by "+leaderName[first] {
		t.Fatalf("target after the leader reconciled: %q", got)
	}
	if st := second.rec.Status(); !st.Suspended {
		t.Fatalf("standby's reconciler not suspended: %+v", st)
	}

	// Work only the standby's table has (its feed ran ahead) is held,
	// suspended, and done at once on takeover by the standby itself.
	second.desire("db", "5")
	if got := targetValue(t, cli, "db"); got != "" {
		t.Fatalf("standby acted: target db = %q", got)
	}
	first.stop()
	waitLeadingExt(t, second.el)
	second.settle(t)
	if got := targetValue(t, cli, "db"); got != "5 by "+leaderName[second] {
		t.Fatalf("target db after takeover: %q, want the new leader's write", got)
	}
	second.desire("web", "4")
	second.settle(t)
	if got := targetValue(t, cli, "web"); got != "4 by "+leaderName[second] {
		t.Fatalf("target web after takeover: %q, want the new leader's write", got)
	}
}

func waitEither(t *testing.T, es ...*leader.Elector) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		chs := []<-chan struct{}{es[0].Changed(), es[1].Changed()}
		if es[0].Leading() || es[1].Leading() {
			return
		}
		select {
		case <-chs[0]:
		case <-chs[1]:
		case <-deadline:
			t.Fatal("no leader")
		}
	}
}

func waitLeadingExt(t *testing.T, e *leader.Elector) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		ch := e.Changed()
		if e.Leading() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatal("not leading")
		}
	}
}

package lease_test

import (
	"context"
	"iter"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/k8s/lease"
	"github.com/converge-go/converge/reconciler"
)

// row is a desired object of the replicas' tables.
type row struct {
	Key    string
	Status reconciler.Status
}

func (r *row) TableHeader() []string { return []string{"Key", "Status"} }
func (r *row) TableRow() []string    { return []string{r.Key, r.Status.Kind.String()} }

var rowKey = statedb.Index[*row, string]{
	Name:       "key",
	FromObject: func(r *row) index.KeySet { return index.NewKeySet(index.String(r.Key)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// op is one Update a replica ran, with the term it ran under.
type op struct {
	replica, key string
	token        lease.Token
	start, end   time.Time
}

// sharedTarget records the Updates of every replica.
type sharedTarget struct {
	mu   sync.Mutex
	ops  []op
	done chan string // keys updated
}

type replicaOps struct {
	name string
	tg   *sharedTarget
}

func (o replicaOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, r *row) error {
	tok, _ := lease.TokenFrom(ctx)
	began := time.Now()
	o.tg.mu.Lock()
	o.tg.ops = append(o.tg.ops, op{replica: o.name, key: r.Key, token: tok, start: began, end: time.Now()})
	o.tg.mu.Unlock()
	select {
	case o.tg.done <- r.Key:
	case <-ctx.Done():
	}
	return nil
}

func (replicaOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *row) error { return nil }
func (replicaOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*row, statedb.Revision]) error {
	return nil
}

// engineReplica is a hive with a table and a reconciler whose Ownership
// is an elector of Lease name, through cfg.
type engineReplica struct {
	*replica
	db    *statedb.DB
	table statedb.RWTable[*row]
	h     *hive.Hive
}

func startEngineReplica(t *testing.T, cfg *rest.Config, name, identity string, tg *sharedTarget) *engineReplica {
	t.Helper()
	r := &engineReplica{replica: start(t, cfg, name, identity)}
	log := hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))
	r.h = hive.New(statedb.Cell, job.Cell, cell.Provide(cell.NewSimpleHealth),
		cell.Module("replica", "Replica",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, rp reconciler.Params) (err error) {
				r.db = db
				if r.table, err = statedb.NewTable(db, "rows", rowKey); err != nil {
					return err
				}
				return reconciler.Register(reconciler.Config[*row]{
					Table:                      r.table,
					GetObjectStatus:            func(o *row) reconciler.Status { return o.Status },
					SetObjectStatus:            func(o *row, s reconciler.Status) *row { o.Status = s; return o },
					CloneObject:                func(o *row) *row { c := *o; return &c },
					Operations:                 replicaOps{name: identity, tg: tg},
					Ownership:                  r.e,
					FullReconciliationInterval: reconciler.Off,
					RefreshInterval:            reconciler.Off,
				}, rp)
			})))
	if err := r.h.Start(log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return r
}

func (r *engineReplica) insert(t *testing.T, key string) {
	t.Helper()
	wtxn := r.db.WriteTxn(r.table)
	if _, _, err := r.table.Insert(wtxn, &row{Key: key, Status: reconciler.StatusPending()}); err != nil {
		t.Fatal(err)
	}
	wtxn.Commit()
}

// Two replicas of a reconciler whose Ownership is an Elector, fed the
// same desired objects: only the leader runs operations, under its
// term's token; when its connection to the API server stops answering,
// the other takes over, and no operation of the old leader starts after
// the new leader's term began.
func TestEngineLeaderOnly(t *testing.T) {
	name := newLeaseName(t)
	tg := &sharedTarget{done: make(chan string, 16)}
	link := srv.NewLink()
	a := startEngineReplica(t, link.Config(), name, "a", tg)
	a.waitLeading(t, true)
	b := startEngineReplica(t, srv.Config(), name, "b", tg)
	for _, r := range []*engineReplica{a, b} {
		r.insert(t, "k1")
	}
	if k := <-tg.done; k != "k1" {
		t.Fatalf("update of %s", k)
	}

	link.Blackhole()
	b.waitLeading(t, true)
	for _, r := range []*engineReplica{a, b} {
		r.insert(t, "k2")
	}
	// b reconciles k2 (and k1 again: a key gained is reconciled at once).
	seen := map[string]bool{}
	for !seen["k2"] {
		seen[<-tg.done] = true
	}
	link.Restore()
	tg.mu.Lock()
	defer tg.mu.Unlock()
	bStart := b.e.Terms()[0]
	for _, o := range tg.ops {
		switch {
		case o.replica == "a" && !o.start.Before(bStart):
			t.Errorf("the old leader started %+v after the new leader's term began at %v", o, bStart)
		case o.replica == "b" && o.token.Holder != "b":
			t.Errorf("operation %+v under another's token", o)
		case o.replica == "a" && o.key == "k2":
			t.Errorf("the old leader reconciled k2: %+v", o)
		}
	}
	if last := tg.ops[len(tg.ops)-1]; last.replica != "b" {
		t.Fatalf("last operation %+v", last)
	}
}

package statedbcompat_test

import (
	"context"
	"errors"
	"expvar"
	"iter"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"
	sdbreconciler "github.com/cilium/statedb/reconciler"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/reconciler/statedbcompat"
)

type obj struct {
	ID     string
	Status reconciler.Status
}

func (o *obj) TableHeader() []string { return []string{"ID", "Status"} }
func (o *obj) TableRow() []string    { return []string{o.ID, o.Status.Kind.String()} }

// pruneSignal is statedb's ExpVarMetrics that also says when a prune was
// reported.
type pruneSignal struct {
	*sdbreconciler.ExpVarMetrics
	pruned chan struct{}
}

func (p pruneSignal) PruneError(id cell.FullModuleID, name string, err error) {
	p.ExpVarMetrics.PruneError(id, name, err)
	p.pruned <- struct{}{}
}

var objID = statedb.Index[*obj, string]{
	Name:       "id",
	FromObject: func(o *obj) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.String(o.ID)) },
	FromKey:    statedbindex.String,
	Unique:     true,
}

// failOnce fails each key's first Update.
type failOnce struct{ seen map[string]*atomic.Int32 }

func (f failOnce) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, o *obj) error {
	if f.seen[o.ID].Add(1) == 1 {
		return errors.New("first attempt fails")
	}
	return nil
}
func (failOnce) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *obj) error { return nil }
func (failOnce) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*obj, statedb.Revision]) error {
	return errors.New("prune fails")
}

// TestMetricsFeedStatedbExpVar runs a converge reconciler whose Metrics is
// statedb's own ExpVarMetrics behind the adapter, and reads statedb's
// variables under statedb's keys: module ID and name.
func TestMetricsFeedStatedbExpVar(t *testing.T) {
	sink := pruneSignal{sdbreconciler.NewUnpublishedExpVarMetrics(), make(chan struct{}, 1)}
	ops := failOnce{seen: map[string]*atomic.Int32{"a": {}, "b": {}}}
	var (
		db    *statedb.DB
		table statedb.RWTable[*obj]
		r     reconciler.Reconciler[*obj]
	)
	h := hive.New(
		statedb.Cell, job.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("agent", "Agent",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db_ *statedb.DB, p reconciler.Params) (err error) {
				db = db_
				if table, err = statedb.NewTable(db, "objs", objID); err != nil {
					return err
				}
				r, err = reconciler.New(reconciler.Config[*obj]{
					Name:                       "routes",
					Table:                      table,
					GetObjectStatus:            func(o *obj) reconciler.Status { return o.Status },
					SetObjectStatus:            func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
					CloneObject:                func(o *obj) *obj { c := *o; return &c },
					Operations:                 ops,
					RetryBackoffMin:            time.Millisecond,
					RetryBackoffMax:            time.Millisecond,
					FullReconciliationInterval: reconciler.Off,
					Metrics:                    statedbcompat.Metrics(sink),
				}, p)
				return err
			}),
		),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	log := hivetest.Logger(t)
	if err := h.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	}()
	wtxn := db.WriteTxn(table)
	table.Insert(wtxn, &obj{ID: "a", Status: reconciler.StatusPending()})
	table.Insert(wtxn, &obj{ID: "b", Status: reconciler.StatusPending()})
	if err := r.WaitUntilSettled(ctx, table.Revision(wtxn.Commit())); err != nil {
		t.Fatal(err)
	}
	r.TriggerFullReconciliation()
	select {
	case <-sink.pruned:
	case <-ctx.Done():
		t.Fatal("no PruneError reported")
	}

	const key = "agent/routes"
	if v, ok := sink.ReconciliationDurationVar.Get(key + "/update").(*expvar.Float); !ok || v.Value() <= 0 {
		t.Errorf("ReconciliationDuration %s/update = %v, want > 0", key, sink.ReconciliationDurationVar.Get(key+"/update"))
	}
	if v := sink.ReconciliationTotalErrorsVar.Get(key); v == nil || v.String() != "2" {
		t.Errorf("total errors = %v, want 2 (each key's first Update)", v)
	}
	if v := sink.ReconciliationCurrentErrorsVar.Get(key); v == nil || v.String() != "0" {
		t.Errorf("current errors = %v, want 0 once both retries succeeded", v)
	}
	if v := sink.PruneTotalErrorsVar.Get(key); v == nil || v.String() != "1" {
		t.Errorf("prune errors = %v, want 1", v)
	}
	if v := sink.PruneCurrentErrorsVar.Get(key); v == nil || v.String() != "1" {
		t.Errorf("current prune errors = %v, want 1", v)
	}
}

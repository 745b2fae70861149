package convergeotel_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler"
)

// item is the desired object of the tests.
type item struct {
	ID     string
	Value  string
	Status reconciler.Status
}

func (o *item) clone() *item { c := *o; return &c }

func (o *item) TableHeader() []string { return []string{"ID", "Value", "Status"} }
func (o *item) TableRow() []string    { return []string{o.ID, o.Value, o.Status.Kind.String()} }

var itemByID = statedb.Index[*item, string]{
	Name:       "id",
	FromObject: func(o *item) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.String(o.ID)) },
	FromKey:    statedbindex.String,
	Unique:     true,
}

// target is a per-object and whole-set target that fails a key as many
// times as told.
type target struct {
	mu    sync.Mutex
	fails map[string]int
	syncs int
}

func (t *target) fail(key string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fails[key] > 0 {
		t.fails[key]--
		return fmt.Errorf("target refused %s", key)
	}
	return nil
}

func (t *target) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, o *item) error {
	return t.fail(o.ID)
}

func (t *target) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *item) error { return nil }

func (t *target) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*item, statedb.Revision]) error {
	return nil
}

func (t *target) Sync(context.Context, statedb.ReadTxn, iter.Seq2[*item, statedb.Revision], iter.Seq[reconciler.Change[*item]]) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.syncs++
	return nil
}

// fixture is a hive with one table and one reconciler observed by obs.
type fixture struct {
	t      testing.TB
	db     *statedb.DB
	table  statedb.RWTable[*item]
	r      reconciler.Reconciler[*item]
	target *target
	ctx    context.Context
}

// start starts a hive whose reconciler (per object, or whole set) is
// observed by obs; it stops when the test ends.
func start(t testing.TB, wholeSet bool, obs ...reconciler.Observer) *fixture {
	return startWith(t, wholeSet, nil, obs...)
}

// startWith is start with edit applied to the reconciler's Config.
func startWith(t testing.TB, wholeSet bool, edit func(*reconciler.Config[*item]), obs ...reconciler.Observer) *fixture {
	f := &fixture{t: t, target: &target{fails: map[string]int{}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	f.ctx = ctx
	h := hive.New(
		statedb.Cell,
		job.Cell,
		reconciler.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("otel-test", "Tracer test",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p reconciler.Params) (err error) {
				f.db = db
				if f.table, err = statedb.NewTable(db, "items", itemByID); err != nil {
					return err
				}
				cfg := reconciler.Config[*item]{
					Table:              f.table,
					GetObjectStatus:    func(o *item) reconciler.Status { return o.Status },
					SetObjectStatus:    func(o *item, s reconciler.Status) *item { o.Status = s; return o },
					CloneObject:        (*item).clone,
					Name:               "items",
					RetryBackoffMin:    time.Millisecond,
					RetryBackoffMax:    2 * time.Millisecond,
					InitialPruneDelay:  reconciler.Off,
					Observers:          obs,
					RoundRateLimiter:   rate.NewLimiter(rate.Inf, 1),
					RefreshInterval:    reconciler.Off,
					RefreshRateLimiter: rate.NewLimiter(rate.Inf, 1),
				}
				if wholeSet {
					cfg.SyncOperations = f.target
					cfg.RoundRateLimiter, cfg.RefreshInterval, cfg.RefreshRateLimiter = nil, 0, nil
					cfg.SyncDebounce = reconciler.Trailing(time.Millisecond, 10*time.Millisecond)
				} else {
					cfg.Operations = f.target
				}
				if edit != nil {
					edit(&cfg)
				}
				f.r, err = reconciler.New(cfg, p)
				return err
			}),
		),
	)
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return f
}

// write inserts objects Pending in ctx, through links when given.
func (f *fixture) write(ctx context.Context, insert func(context.Context, statedb.WriteTxn, *item) error, ids ...string) {
	f.t.Helper()
	wtxn := f.db.WriteTxn(f.table)
	for _, id := range ids {
		o := &item{ID: id, Value: "v", Status: reconciler.StatusPending()}
		var err error
		if insert != nil {
			err = insert(ctx, wtxn, o)
		} else {
			_, _, err = f.table.Insert(wtxn, o)
		}
		if err != nil {
			f.t.Fatal(err)
		}
	}
	wtxn.Commit()
}

// settle waits until everything written so far is reconciled.
func (f *fixture) settle() {
	f.t.Helper()
	rev := f.table.Revision(f.db.ReadTxn())
	if err := f.r.WaitUntilSettled(f.ctx, rev); err != nil {
		f.t.Fatal(err)
	}
}

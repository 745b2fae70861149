package reconciler_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/hive/script"
	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"
	"github.com/spf13/pflag"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/index"
	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// testObject is the desired object of the tests: a key and a value, with
// a status for a single reconciler and a StatusSet for several.
type testObject struct {
	ID       string               `yaml:"id"`
	Value    string               `yaml:"value"`
	Status   reconciler.Status    `yaml:"status"`
	Statuses reconciler.StatusSet `yaml:"statuses"`
}

func (o *testObject) Clone() *testObject { c := *o; return &c }

func (o *testObject) TableHeader() []string {
	return []string{"ID", "Value", "Status", "Statuses", "Error"}
}

func (o *testObject) TableRow() []string {
	var kinds []string
	for name, st := range o.Statuses.All() {
		kinds = append(kinds, name+"="+st.Kind.String())
	}
	return []string{o.ID, o.Value, o.Status.Kind.String(), strings.Join(kinds, ","), o.Status.Error}
}

var idIndex = statedb.Index[*testObject, string]{
	Name:       "id",
	FromObject: func(o *testObject) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.String(o.ID)) },
	FromKey:    statedbindex.String,
	FromString: statedbindex.FromString,
	Unique:     true,
}

var statusIndex = index.NewStatusIndex("status", func(o *testObject) reconciler.Status { return o.Status })

// wrappers lets the fake target build our special errors.
var wrappers = fake.Wrappers{Permanent: reconciler.Permanent, RetryAfter: reconciler.RetryAfter}

// testOps adapts a fake target to Operations and BatchOperations.
type testOps struct {
	target    *fake.Target
	getStatus func(*testObject) reconciler.Status
}

func (o *testOps) Update(ctx context.Context, _ statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	if rev == 0 {
		panic("revision 0")
	}
	return o.target.Update(ctx, obj.ID, obj.Value, o.getStatus(obj).Kind == reconciler.StatusKindRefreshing)
}

func (o *testOps) Delete(ctx context.Context, _ statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	if rev == 0 {
		panic("revision 0")
	}
	return o.target.Delete(ctx, obj.ID)
}

func (o *testOps) Prune(ctx context.Context, _ statedb.ReadTxn, objs iter.Seq2[*testObject, statedb.Revision]) error {
	desired := map[string]bool{}
	for obj := range objs {
		desired[obj.ID] = true
	}
	return o.target.Prune(ctx, desired)
}

func (o *testOps) UpdateBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	eachEntry(ctx, txn, batch, o.Update)
}

func (o *testOps) DeleteBatch(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject]) {
	eachEntry(ctx, txn, batch, o.Delete)
}

// objectOp is an Update or Delete of the tests' ops.
type objectOp = func(context.Context, statedb.ReadTxn, statedb.Revision, *testObject) error

// eachEntry is a batch operation made of a one-object one: op runs for
// every entry in order, and its error is the entry's Result. The tests'
// ops implement BatchOperations with it, each over its own Update and
// Delete.
func eachEntry(ctx context.Context, txn statedb.ReadTxn, batch []reconciler.BatchEntry[*testObject], op objectOp) {
	for i := range batch {
		batch[i].Result = op(ctx, txn, batch[i].Revision, batch[i].Object)
	}
}

// fixture is one test hive: the table, the reconcilers started in it by
// name, and their targets.
type fixture struct {
	t        testing.TB
	log      *slog.Logger
	hive     *hive.Hive
	db       *statedb.DB
	table    statedb.RWTable[*testObject]
	links    statedb.RWTable[*device] // another table, for Config.Requires
	params   reconciler.Params
	markInit func()

	reconcilers map[string]reconciler.Reconciler[*testObject]
	targets     map[string]*fake.Target
	// marks holds, per target, the position in its history after which
	// target/expect looks (see the target/expect command).
	marks map[string]int

	health *cell.SimpleHealth // the root of the hive's health
}

func newFixture(t testing.TB) *fixture {
	f := &fixture{
		t:           t,
		log:         hivetest.Logger(t),
		reconcilers: map[string]reconciler.Reconciler[*testObject]{},
		targets:     map[string]*fake.Target{},
		marks:       map[string]int{},
	}
	f.hive = hive.New(
		statedb.Cell,
		job.Cell,
		reconciler.Cell,
		cell.Provide(
			cell.NewSimpleHealth,
			func(h *cell.SimpleHealth) hive.ScriptCmdOut {
				return hive.NewScriptCmd("health", cell.SimpleHealthCmd(h))
			},
		),
		cell.Invoke(func(h *cell.SimpleHealth) { f.health = h }),
		cell.Module("test", "Test",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p reconciler.Params) (err error) {
				f.db, f.params = db, p
				f.table, err = statedb.NewTable(db, "test-objects", idIndex, statusIndex)
				if err != nil {
					return err
				}
				// What "start --requires" has the objects require.
				if f.links, err = statedb.NewTable(db, "test-links", deviceIndex); err != nil {
					return err
				}
				wtxn := db.WriteTxn(f.table)
				done := f.table.RegisterInitializer(wtxn, "test")
				wtxn.Commit()
				f.markInit = func() {
					wtxn := db.WriteTxn(f.table)
					done(wtxn)
					wtxn.Commit()
				}
				return nil
			}),
		),
	)
	return f
}

// startedFixture returns a new fixture with its hive started, stopped
// when the test ends (inside a synctest bubble, before the bubble does,
// even when the test fails: the bubble must end with no goroutine left).
func startedFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	if err := f.hive.Start(f.log, context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.hive.Stop(f.log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return f
}

// startFixture returns a started fixture and a context that ends after
// timeout; the hive is stopped (and a failed stop reported) when the test
// ends.
func startFixture(t *testing.T, timeout time.Duration) (*fixture, context.Context) {
	t.Helper()
	f := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	if err := f.hive.Start(f.log, ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.hive.Stop(f.log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return f, ctx
}

// load inserts objs as they are (statuses included) in one transaction and
// marks the table initialized.
func (f *fixture) load(objs []*testObject) {
	f.t.Helper()
	wtxn := f.db.WriteTxn(f.table)
	for _, obj := range objs {
		if _, _, err := f.table.Insert(wtxn, obj); err != nil {
			f.t.Fatalf("insert: %s", err)
		}
	}
	wtxn.Commit()
	f.markInit()
}

// target returns the fake target of the named reconciler, creating it.
func (f *fixture) target(name string) *fake.Target {
	if f.targets[name] == nil {
		f.targets[name] = fake.New(wrappers)
	}
	return f.targets[name]
}

func (f *fixture) reconciler(name string) (reconciler.Reconciler[*testObject], error) {
	r, ok := f.reconcilers[name]
	if !ok {
		return nil, fmt.Errorf("no reconciler %q started", name)
	}
	return r, nil
}

// startFlags are the options of the "start" command.
func startFlags(fs *pflag.FlagSet) {
	fs.String("name", "", "reconciler name; with --statusset also its StatusSet name")
	fs.Bool("statusset", false, "keep the status in the object's StatusSet")
	fs.Bool("batch", false, "use BatchOperations")
	fs.Int("concurrency", 0, "Config.Concurrency")
	fs.Int("round-size", 0, "Config.RoundSize")
	fs.Int("max-retries", 0, "Config.MaxRetries")
	fs.Duration("timeout", 0, "Config.OperationTimeout")
	fs.Duration("full", reconciler.Off, "Config.FullReconciliationInterval (default Off)")
	fs.Duration("refresh", reconciler.Off, "Config.RefreshInterval (default Off)")
	fs.Duration("backoff", 10*time.Millisecond, "Config.RetryBackoffMin")
	fs.Duration("backoff-max", 50*time.Millisecond, "Config.RetryBackoffMax")
	fs.Bool("suspended", false, "Config.StartSuspended")
	fs.Bool("deps", false, "Config.DependsOn: an object's value \"v>a,b\" depends on a and b")
	fs.Bool("requires", false, "Config.Requires: an object's value \"v@l1,l2\" requires links l1 and l2 up, in table test-links")
	fs.Bool("sync", false, "whole-set: SyncOperations instead of Operations")
	fs.Duration("quiet", 0, "with --sync: Config.SyncDebounce.Quiet")
	fs.Duration("max-wait", 0, "with --sync: Config.SyncDebounce.MaxWait")
	fs.Duration("refractory", 0, "with --sync: Config.SyncDebounce.Refractory")
}

func (f *fixture) start(s *script.State) error {
	name, _ := s.Flags.GetString("name")
	useSet, _ := s.Flags.GetBool("statusset")
	batch, _ := s.Flags.GetBool("batch")
	concurrency, _ := s.Flags.GetInt("concurrency")
	roundSize, _ := s.Flags.GetInt("round-size")
	maxRetries, _ := s.Flags.GetInt("max-retries")
	timeout, _ := s.Flags.GetDuration("timeout")
	full, _ := s.Flags.GetDuration("full")
	refresh, _ := s.Flags.GetDuration("refresh")
	backoff, _ := s.Flags.GetDuration("backoff")
	backoffMax, _ := s.Flags.GetDuration("backoff-max")
	suspended, _ := s.Flags.GetBool("suspended")

	get := func(o *testObject) reconciler.Status { return o.Status }
	set := func(o *testObject, st reconciler.Status) *testObject { o.Status = st; return o }
	if useSet {
		get = func(o *testObject) reconciler.Status { return o.Statuses.Get(name) }
		set = func(o *testObject, st reconciler.Status) *testObject { o.Statuses = o.Statuses.Set(name, st); return o }
	}
	ops := &testOps{target: f.target(name), getStatus: get}
	cfg := reconciler.Config[*testObject]{
		Table:                      f.table,
		GetObjectStatus:            get,
		SetObjectStatus:            set,
		CloneObject:                (*testObject).Clone,
		Operations:                 ops,
		Name:                       name,
		RoundSize:                  roundSize,
		RoundRateLimiter:           rate.NewLimiter(rate.Inf, 1),
		Concurrency:                concurrency,
		OperationTimeout:           timeout,
		RetryBackoffMin:            backoff,
		RetryBackoffMax:            backoffMax,
		MaxRetries:                 maxRetries,
		FullReconciliationInterval: full,
		RefreshInterval:            refresh,
		RefreshRateLimiter:         rate.NewLimiter(rate.Inf, 1),
		StartSuspended:             suspended,
	}
	if batch {
		cfg.BatchOperations = ops
	}
	if deps, _ := s.Flags.GetBool("deps"); deps {
		cfg.DependsOn = dependsOn
	}
	if req, _ := s.Flags.GetBool("requires"); req {
		cfg.Requires = []reconciler.Requirement[*testObject]{reconciler.Requires(f.links, requiredDevices, deviceUp)}
	}
	if sync, _ := s.Flags.GetBool("sync"); sync {
		syncShape(s, &cfg, f.target(name))
	}
	r, err := reconciler.New(cfg, f.params)
	if err != nil {
		return err
	}
	f.reconcilers[name] = r
	return nil
}

// waitReconciled waits until every change so far is reconciled
// successfully: WaitUntilReconciled for the deletes and retries, and
// WaitForReconciliation for the statuses.
func (f *fixture) waitReconciled(ctx context.Context, r reconciler.Reconciler[*testObject], checkStatus bool) error {
	rev := f.table.Revision(f.db.ReadTxn())
	if err := r.WaitUntilSettled(ctx, rev); err != nil {
		return err
	}
	if checkStatus {
		return reconciler.WaitForReconciliation(ctx, f.db, f.table.ToTable(), statusIndex)
	}
	return nil
}

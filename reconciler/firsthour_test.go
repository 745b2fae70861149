package reconciler_test

import (
	"context"
	"errors"
	"iter"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// Engine-side tests of the newcomer's first hour (issue 22).

// pruneRecorder records the desired sets Prune was given.
type pruneRecorder struct {
	scriptedOps
	mu   sync.Mutex
	seen [][]string
	done chan struct{}
}

func (p *pruneRecorder) Prune(_ context.Context, _ statedb.ReadTxn, objs iter.Seq2[*testObject, statedb.Revision]) error {
	var ids []string
	for o := range objs {
		ids = append(ids, o.ID)
	}
	p.mu.Lock()
	p.seen = append(p.seen, ids)
	p.mu.Unlock()
	select {
	case p.done <- struct{}{}:
	default:
	}
	return nil
}

// A table on which nobody registered an initializer counts as
// initialized at once; the first prune must still wait for the program's
// first write, or it would wipe what an earlier run applied.
func TestFirstPruneWaitsForFirstWrite(t *testing.T) {
	var (
		db    *statedb.DB
		table statedb.RWTable[*testObject]
		r     reconciler.Reconciler[*testObject]
	)
	ops := &pruneRecorder{scriptedOps: *newScriptedOps(func(context.Context, string, int, *testObject) error { return nil }),
		done: make(chan struct{}, 1)}
	h := hive.New(statedb.Cell, job.Cell, reconciler.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("test", "Test",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(d *statedb.DB, p reconciler.Params) (err error) {
				db = d
				if table, err = statedb.NewTable(d, "test-objects", idIndex, statusIndex); err != nil {
					return err
				}
				cfg := reconciler.Config[*testObject]{
					Table:           table,
					GetObjectStatus: func(o *testObject) reconciler.Status { return o.Status },
					SetObjectStatus: func(o *testObject, s reconciler.Status) *testObject { o.Status = s; return o },
					CloneObject:     (*testObject).Clone,
					Operations:      ops,
				}
				r, err = reconciler.New(cfg, p)
				return err
			})))
	log := hivetest.Logger(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	defer h.Stop(log, context.Background())

	// The loop has run (and would have pruned by now if it were going to).
	for !r.Status().Initialized {
		select {
		case <-ctx.Done():
			t.Fatal("the reconciler never reported")
		case <-time.After(time.Millisecond):
		}
	}
	wtxn := db.WriteTxn(table)
	table.Insert(wtxn, &testObject{ID: "a", Status: reconciler.StatusPending()})
	wtxn.Commit()
	select {
	case <-ops.done:
	case <-ctx.Done():
		t.Fatal("no prune after the first write")
	}
	ops.mu.Lock()
	defer ops.mu.Unlock()
	for i, ids := range ops.seen {
		if len(ids) == 0 || ids[0] != "a" {
			t.Errorf("prune %d was given %v: it ran before the desired set was written", i, ids)
		}
	}
}

// OperationTimeout takes Off like the other intervals, and Name is
// limited to a documented character set.
func TestConfigOffTimeoutAndName(t *testing.T) {
	f, _ := startFixture(t, 10*time.Second)
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return nil })
	if _, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{OperationTimeout: reconciler.Off}), f.params); err != nil {
		t.Errorf("OperationTimeout: Off refused: %s", err)
	}
	for _, name := range []string{"a b/c", "x/y", "tab\t", strings.Repeat("n", 65)} {
		_, err := reconciler.New(testConfig(f, ops, reconciler.Config[*testObject]{Name: name}), f.params)
		if !errors.Is(err, reconciler.ErrInvalidConfig) || !strings.Contains(err.Error(), "Config.Name") {
			t.Errorf("Name %q: %v, want an error naming Config.Name", name, err)
		}
	}
}

// A wait that times out says what is outstanding: how many objects, the
// oldest key and its state.
func TestWaitErrorSaysWhatIsOutstanding(t *testing.T) {
	f, ctx := startFixture(t, 10*time.Second)
	f.markInit()
	ops := newScriptedOps(func(context.Context, string, int, *testObject) error { return errors.New("connection refused") })
	r := mustNew(t, f, testConfig(f, ops, reconciler.Config[*testObject]{}))
	rev := f.insert(t, &testObject{ID: "stuck", Status: reconciler.StatusPending()})
	f.waitFor(ctx, t, "the first failure", func() bool { return r.Status().Objects.Error == 1 })
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	err := r.WaitUntilSettled(short, rev)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitUntilSettled = %v, want a deadline", err)
	}
	for _, want := range []string{"1 object(s) outstanding", "stuck", "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the wait's error %q does not say %q", err, want)
		}
	}
}

package waitorder

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	sdbindex "github.com/cilium/statedb/index"
	"github.com/converge-go/converge/benchmarks/internal/bench"
)

// logger is what the hives log to: errors only, on stderr. A hung
// target's timeouts are warnings, not logged.
var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))

// tableSystem is a System made of a hive with statedb, a table of
// numbered objects and one reconciler; the functions fill in what differs
// between converge's and statedb's.
type tableSystem[Obj any] struct {
	h       *hive.Hive
	db      *statedb.DB
	table   statedb.RWTable[Obj]
	ids     statedb.Index[Obj, uint64]
	preload int

	pending func(id uint64) Obj         // a new object, marked for reconciliation
	done    func(id uint64) Obj         // a Done object, for the preload
	touched func(Obj) Obj               // a clone with a new value, marked
	isDone  func(Obj) bool              // its status is Done
	waitAll func(context.Context) error // nothing outstanding
}

// idIndex returns the primary index of a table of numbered objects.
func idIndex[Obj any](id func(Obj) uint64) statedb.Index[Obj, uint64] {
	return statedb.Index[Obj, uint64]{
		Name:       "id",
		FromObject: func(o Obj) sdbindex.KeySet { return sdbindex.NewKeySet(sdbindex.Uint64(id(o))) },
		FromKey:    sdbindex.Uint64,
		Unique:     true,
	}
}

// newHive is the hive of every phase: statedb, jobs, health and one
// module whose invoke creates the table and the reconciler. The module's
// jobs carry the profiler labels of ctx.
func newHive(ctx context.Context, invoke any) *hive.Hive {
	var kv []string
	pprof.ForLabels(ctx, func(k, v string) bool { kv = append(kv, k, v); return true })
	labels := pprof.Labels(kv...)
	return hive.New(
		statedb.Cell,
		job.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("bench", "Benchmark",
			cell.Provide(func(r job.Registry, h cell.Health) job.Group {
				return r.NewGroup(h, job.WithPprofLabels(labels))
			}),
			cell.Invoke(invoke),
		),
	)
}

// populate builds the hive's objects and writes the preload, Done.
func (s *tableSystem[Obj]) populate() error {
	if err := s.h.Populate(logger); err != nil {
		return err
	}
	return bench.Preload(s.db, s.table, s.preload, 1000, s.done)
}

func (s *tableSystem[Obj]) Start(ctx context.Context) error {
	err := s.h.Start(logger, context.Background())
	// hive's job package clears the profiler labels of the goroutine that
	// starts it; put the run's back.
	pprof.SetGoroutineLabels(ctx)
	return err
}

func (s *tableSystem[Obj]) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return s.h.Stop(logger, ctx)
}

func (s *tableSystem[Obj]) Insert(from, to int)     { s.insert(from, to, s.pending) }
func (s *tableSystem[Obj]) InsertDone(from, to int) { s.insert(from, to, s.done) }

// insert writes objects [from, to), as mk makes them, in one write
// transaction.
func (s *tableSystem[Obj]) insert(from, to int, mk func(uint64) Obj) {
	wtxn := s.db.WriteTxn(s.table)
	for id := from; id < to; id++ {
		s.table.Insert(wtxn, mk(uint64(id)))
	}
	wtxn.Commit()
}

func (s *tableSystem[Obj]) Touch(id int) (uint64, time.Time) {
	wtxn := s.db.WriteTxn(s.table)
	obj, _, found := s.table.Get(wtxn, s.ids.Query(uint64(id)))
	if !found {
		panic(fmt.Sprintf("touch: object %d not in the table", id))
	}
	s.table.Insert(wtxn, s.touched(obj))
	rev := s.table.Revision(wtxn)
	at := time.Now()
	wtxn.Commit()
	return rev, at
}

func (s *tableSystem[Obj]) WaitDone(ctx context.Context, id int, after uint64) error {
	for {
		obj, rev, watch, found := s.table.GetWatch(s.db.ReadTxn(), s.ids.Query(uint64(id)))
		if found && rev > after && s.isDone(obj) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("object %d not Done: %w", id, ctx.Err())
		case <-watch:
		}
	}
}

func (s *tableSystem[Obj]) WaitAll(ctx context.Context) error { return s.waitAll(ctx) }

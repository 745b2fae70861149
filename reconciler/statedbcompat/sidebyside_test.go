package statedbcompat_test

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	sdbreconciler "github.com/cilium/statedb/reconciler"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/reconciler/statedbcompat"
)

// The side-by-side test: the same scripted work on a directory of files,
// once through statedb's reconciler and once through converge configured
// by statedbcompat.Config with the same options. Switching must change
// nothing the user did not choose: the same files in the end, and drift
// repaired as fast. Each side runs in a testing/synctest bubble, so time
// is the bubble's clock: the drift-repair time is measured exactly, and
// an hour of refreshes takes no wall-clock time.

const (
	sbsRefresh   = time.Minute                // WithRefreshing
	sbsRoundRate = 100                        // rounds a second: WithRoundLimits' limiter
	sbsRound     = time.Second / sbsRoundRate // one round's spacing
)

// sbsRegister adds one side's reconciler over table and target to the
// hive, with the options both sides share.
type sbsRegister func(table *statedb.RWTable[*file], target *fileTarget) cell.Cell

func statedbSide(table *statedb.RWTable[*file], target *fileTarget) cell.Cell {
	return cell.Invoke(func(p sdbreconciler.Params) error {
		_, err := sdbreconciler.Register(p, *table, cloneFile,
			func(f *file, s sdbreconciler.Status) *file { f.Status = s; return f },
			func(f *file) sdbreconciler.Status { return f.Status },
			target, nil,
			sdbreconciler.WithPruning(time.Hour),
			sdbreconciler.WithRefreshing(sbsRefresh, nil),
			sdbreconciler.WithRetry(100*time.Millisecond, time.Second),
			sdbreconciler.WithRoundLimits(100, rate.NewLimiter(sbsRoundRate, 1)))
		return err
	})
}

func convergeSide(table *statedb.RWTable[*file], target *fileTarget) cell.Cell {
	return cell.Invoke(func(p reconciler.Params) error {
		return reconciler.Register(statedbcompat.Config(*table, cloneFile,
			func(f *file, s reconciler.Status) *file { f.Status = statedbcompat.StatusToStatedb(s); return f },
			func(f *file) reconciler.Status { return statedbcompat.StatusFromStatedb(f.Status) },
			target, nil,
			statedbcompat.WithPruning(time.Hour),
			statedbcompat.WithRefreshing(sbsRefresh, nil),
			statedbcompat.WithRetry(100*time.Millisecond, time.Second),
			statedbcompat.WithRoundLimits(100, rate.NewLimiter(sbsRoundRate, 1))), p)
	})
}

// sbsRun is one side's run of the script.
type sbsRun struct {
	t      *testing.T
	dir    string
	reg    sbsRegister
	h      *hive.Hive
	db     *statedb.DB
	table  statedb.RWTable[*file]
	target *fileTarget
	init   func(statedb.WriteTxn)
}

// start starts a hive with a new table, over the directory.
func (r *sbsRun) start() {
	r.target = newFileTarget(r.dir)
	r.h = hive.New(
		statedb.Cell, job.Cell, reconciler.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("files", "Files",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB) (err error) {
				r.db = db
				if r.table, err = statedb.NewTable(db, "files", fileName); err != nil {
					return err
				}
				wtxn := db.WriteTxn(r.table)
				r.init = r.table.RegisterInitializer(wtxn, "script")
				wtxn.Commit()
				return nil
			}),
			r.reg(&r.table, r.target),
		),
	)
	if err := r.h.Start(hivetest.Logger(r.t), context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

func (r *sbsRun) stop() {
	if err := r.h.Stop(hivetest.Logger(r.t), context.Background()); err != nil {
		r.t.Error(err)
	}
}

// write applies fn in one write transaction.
func (r *sbsRun) write(fn func(wtxn statedb.WriteTxn)) {
	wtxn := r.db.WriteTxn(r.table)
	fn(wtxn)
	wtxn.Commit()
}

// put inserts or replaces the named files, Pending.
func (r *sbsRun) put(wtxn statedb.WriteTxn, files map[string]string) {
	for name, content := range files {
		r.table.Insert(wtxn, &file{Name: name, Content: content, Status: sdbreconciler.StatusPending()})
	}
}

// settle lets d of the bubble's time pass and everything settle, then
// checks that the directory holds what the table says and that every
// object is Done.
func (r *sbsRun) settle(d time.Duration, what string) map[string]string {
	r.t.Helper()
	time.Sleep(d)
	synctest.Wait()
	want := map[string]string{}
	for f := range r.table.All(r.db.ReadTxn()) {
		want[f.Name] = f.Content
		if f.Status.Kind != sdbreconciler.StatusKindDone {
			r.t.Errorf("%s: %s is %s, want Done", what, f.Name, f.Status)
		}
	}
	got, err := listDir(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	if !maps.Equal(got, want) {
		r.t.Errorf("%s: directory %v, table %v", what, got, want)
	}
	return got
}

// sbsResult is what a side's run came to.
type sbsResult struct {
	final  map[string]string // the directory after the restart
	repair time.Duration     // from tampering to the file repaired
	drift  time.Duration     // from the file's last write before the tampering to the tampering
}

// runScript runs the script in a bubble of its own: inserts, a tampered
// file, a failing update, a delete, refresh, and a restart over the same
// directory with a stray file for Prune.
func runScript(t *testing.T, reg sbsRegister) (res sbsResult) {
	dir := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		r := &sbsRun{t: t, dir: dir, reg: reg}
		r.start()
		r.write(func(wtxn statedb.WriteTxn) {
			r.put(wtxn, map[string]string{"a": "A", "b": "B", "c": "C", "d": "D", "e": "E"})
			r.init(wtxn)
		})
		r.settle(time.Second, "inserted")

		// Tamper with b, written a second ago: a refresh repairs it
		// RefreshInterval after that write, so less than RefreshInterval
		// after the tampering.
		tampered, from := time.Now(), r.target.mark()
		res.drift = tampered.Sub(r.target.lastWrite("b"))
		if err := os.WriteFile(filepath.Join(dir, "b"), []byte("tampered"), 0o600); err != nil {
			t.Fatal(err)
		}

		// A failing update (twice, then it succeeds) and a delete.
		r.target.fail("a", 2)
		r.write(func(wtxn statedb.WriteTxn) {
			r.put(wtxn, map[string]string{"a": "A2"})
			e, _, _ := r.table.Get(wtxn, fileName.Query("e"))
			r.table.Delete(wtxn, e)
		})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := r.target.failed(); n != 2 {
			t.Errorf("%d injected failures, want 2", n)
		}

		// Refresh repairs b within RefreshInterval and a round.
		r.settle(sbsRefresh+2*sbsRound-10*time.Second, "refreshed")
		at, ok := r.target.firstRewriteSince("b", from)
		if !ok {
			t.Fatalf("b not repaired %v after tampering", time.Since(tampered))
		}
		res.repair = at.Sub(tampered)
		r.stop()

		// Restart over the same directory, the table filled again, a
		// stray file left behind.
		if err := os.WriteFile(filepath.Join(dir, "stray"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		r.start()
		r.write(func(wtxn statedb.WriteTxn) {
			r.put(wtxn, map[string]string{"a": "A2", "b": "B", "c": "C", "d": "D"})
			r.init(wtxn)
		})
		res.final = r.settle(time.Second, "restarted")
		r.stop()
	})
	return res
}

// TestSideBySide runs the script through both reconcilers and compares.
func TestSideBySide(t *testing.T) {
	var sdb, cvg sbsResult
	t.Run("statedb", func(t *testing.T) { sdb = runScript(t, statedbSide) })
	t.Run("converge", func(t *testing.T) { cvg = runScript(t, convergeSide) })
	want := map[string]string{"a": "A2", "b": "B", "c": "C", "d": "D"}
	if !maps.Equal(sdb.final, want) || !maps.Equal(cvg.final, want) {
		t.Errorf("end state: statedb %v, converge %v, want %v", sdb.final, cvg.final, want)
	}
	for name, res := range map[string]sbsResult{"statedb": sdb, "converge": cvg} {
		// From the tampering, and from the last write before it (the
		// earliest the file could have been tampered with): both within
		// RefreshInterval plus one round.
		t.Logf("%s: drift repaired %v after the tampering, %v after the file's last write", name, res.repair, res.drift+res.repair)
		if res.repair <= 0 || res.drift+res.repair > sbsRefresh+sbsRound {
			t.Errorf("%s repaired drift %v after tampering, %v after the file's last write; want within RefreshInterval (%v) plus one round (%v)",
				name, res.repair, res.drift+res.repair, sbsRefresh, sbsRound)
		}
	}
	// Compared from the last write, which does not depend on the round
	// the file was first written in: statedb's refresh marks objects one
	// write transaction at a time, so the file may wait for the round
	// after the first object marked.
	if d := (cvg.drift + cvg.repair) - (sdb.drift + sdb.repair); d > sbsRound || d < -sbsRound {
		t.Errorf("drift repair differs by %v between the sides, want at most a round (%v)", d, sbsRound)
	}
}

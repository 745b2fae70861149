package reconciler_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// TestDependenciesAfterRestart: what an earlier run applied is taken from
// the table as the run begins: deleting a directory and its file, both
// Done before the run, deletes the file first (its Delete waits for the
// objects depending on it, then the directory's for it); an object still
// Pending whose dependency is Done is reconciled at once.
func TestDependenciesAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, tg, _ := restarted(t, reconciler.Config[*testObject]{},
			&testObject{ID: "other", Value: "v>file", Status: reconciler.StatusPending()})
		if h := tg.History(); !slices.Equal(h, []string{"update(other)"}) {
			t.Fatalf("history %v, want the pending file only", h)
		}
		deleteKeys(t, f, "dir", "file", "other")
		time.Sleep(time.Second) // rounds are paced: let them come
		synctest.Wait()
		got := deletesOf(tg)
		if !slices.Equal(got, []string{"other", "file", "dir"}) {
			r, _ := f.reconciler("")
			for _, k := range []string{"dir", "file", "other"} {
				e, _ := r.Explain(context.Background(), []byte(k))
				t.Log(e)
			}
			t.Fatalf("deletes %v (history %v), want other, file, dir", got, tg.History())
		}
	})
}

// restarted starts, in the caller's bubble, a reconciler configured as
// cfg over a table an earlier run left (dir, and file naming it, both
// Done and in the target; and more), once it has done what it can.
func restarted(t *testing.T, cfg reconciler.Config[*testObject], more ...*testObject) (*fixture, *fake.Target, reconciler.Reconciler[*testObject]) {
	f := startedFixture(t)
	done := reconciler.StatusDone()
	tg := f.target("")
	for _, k := range []string{"dir", "file"} {
		tg.Set(k, "earlier") // what the earlier run left
	}
	f.load(append([]*testObject{{ID: "dir", Value: "d", Status: done}, {ID: "file", Value: "v>dir", Status: done}}, more...))
	ops := &timedOps{testOps: testOps{target: tg, getStatus: func(o *testObject) reconciler.Status { return o.Status }}}
	cfg.FullReconciliationInterval, cfg.RefreshInterval, cfg.DependsOn = reconciler.Off, reconciler.Off, dependsOn
	r := mustNew(t, f, testConfig(f, ops, cfg))
	f.reconcilers[""] = r
	synctest.Wait()
	return f, tg, r
}

// restartedSuspended is restarted suspended, with two workers: it has
// read nothing yet.
func restartedSuspended(t *testing.T) (*fixture, *fake.Target, reconciler.Reconciler[*testObject]) {
	return restarted(t, reconciler.Config[*testObject]{StartSuspended: true, Concurrency: 2})
}

// TestDependenciesAfterRestartDeletedFirst: an object in the table as the
// run began and deleted before the run first read it is read first as a
// delete; what it names is applied all the same (the earlier run left it
// in the target), so its dependency's Delete waits for its own. The
// reconciler starts suspended: it reads nothing until resumed, after both
// deletes; the file's Delete is stuck a while, and the directory's waits.
func TestDependenciesAfterRestartDeletedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, tg, r := restartedSuspended(t)
		deleteKeys(t, f, "dir", "file")
		tg.SetFault("file", fake.Fault{Mode: fake.ModeStuck})
		r.Resume()
		time.Sleep(time.Second)
		synctest.Wait()
		if got := deletesOf(tg); slices.Contains(got, "dir") {
			t.Fatalf("dir deleted while the file, which names it, is in the target: %v", tg.History())
		}
		tg.Heal("file")
		time.Sleep(time.Second)
		synctest.Wait()
		if got := deletesOf(tg); !slices.Equal(got, []string{"file", "dir"}) {
			t.Fatalf("deletes %v (history %v), want file, dir", got, tg.History())
		}
	})
}

// TestDependenciesAfterRestartChangedFirst: an object in the table as the
// run began and changed before the run first read it is read at its new
// version, which names its dependency no more; the earlier run left the
// old version in the target, which does. The dependency's Delete waits
// until the new version is applied (its Update is stuck a while).
func TestDependenciesAfterRestartChangedFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f, tg, r := restartedSuspended(t)
		insert(t, f, pendingObject("file", "v2")) // names nothing now
		deleteKeys(t, f, "dir")
		tg.SetFault("file", fake.Fault{Mode: fake.ModeStuck})
		r.Resume()
		time.Sleep(time.Second)
		synctest.Wait()
		if slices.Contains(deletesOf(tg), "dir") {
			t.Fatalf("dir deleted while the target holds the file's old version, which names it: %v", tg.History())
		}
		tg.Heal("file")
		time.Sleep(time.Second)
		synctest.Wait()
		h := tg.History()
		if i, j := slices.Index(h, "update(file)"), slices.Index(h, "delete(dir)"); i < 0 || j < i {
			t.Fatalf("history %v, want the file's update, then the directory's delete", h)
		}
	})
}

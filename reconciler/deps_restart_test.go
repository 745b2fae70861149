package reconciler_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// TestDependenciesAfterRestart: what an earlier run applied is taken from
// the table as the run begins: deleting a directory and its file, both
// Done before the run, deletes the file first (its Delete waits for the
// objects depending on it, then the directory's for it); an object still
// Pending whose dependency is Done is reconciled at once.
func TestDependenciesAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		if err := f.hive.Start(f.log, context.Background()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := f.hive.Stop(f.log, context.Background()); err != nil {
				t.Error(err)
			}
		})
		done := reconciler.StatusDone()
		tg := f.target("")
		for _, k := range []string{"dir", "file"} {
			tg.Set(k, "earlier") // what the earlier run left
		}
		f.load([]*testObject{{ID: "dir", Value: "d", Status: done}, {ID: "file", Value: "v>dir", Status: done},
			{ID: "other", Value: "v>file", Status: reconciler.StatusPending()}})
		ops := &timedOps{testOps: testOps{target: tg, getStatus: func(o *testObject) reconciler.Status { return o.Status }}}
		cfg := testConfig(f, ops, reconciler.Config[*testObject]{
			FullReconciliationInterval: reconciler.Off, RefreshInterval: reconciler.Off, DependsOn: dependsOn,
		})
		f.reconcilers[""] = mustNew(t, f, cfg)
		synctest.Wait()
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

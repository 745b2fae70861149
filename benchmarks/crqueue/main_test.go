package main

import (
	"context"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/converge-go/converge/benchmarks/internal/waitorder"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestSuite runs every workload once per side at tiny sizes and checks
// that each row has a result for both sides. It asserts that the harness
// works, never a timing.
func TestSuite(t *testing.T) {
	o := options{sizes: waitorder.TinySizes(), pairs: 1, only: regexp.MustCompile(""), runTimeout: time.Minute}
	var log strings.Builder
	rows, err := runSuite(o, &log)
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatal(err)
	}
	want := 0
	for _, w := range workloads(o.sizes) {
		want += len(w.rows)
	}
	if len(rows) != want {
		t.Errorf("%d rows, want %d", len(rows), want)
	}
	for _, r := range rows {
		for side, x := range map[string]float64{ours: r.Converge, theirs: r.Theirs} {
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				t.Errorf("%s: %s result is %v", r.Workload, side, x)
			}
		}
		if r.Runs != 1 {
			t.Errorf("%s: %d runs, want 1", r.Workload, r.Runs)
		}
	}
	var out strings.Builder
	if err := writeTable(&out, rows); err != nil || !strings.Contains(out.String(), "hung-target/healthy-vs-no-hung") {
		t.Errorf("writeTable: %v\n%s", err, out.String())
	}
}

// TestCRWorkloads runs each workload on the controller-runtime side and
// checks that the target saw the work: the backlog and every change, and
// hung Updates that failed (hung-target's phases wait for a healthy
// Update to succeed before they measure).
func TestCRWorkloads(t *testing.T) {
	sz := waitorder.TinySizes()
	ctx := context.Background()
	for name, run := range map[string]func() (map[string]float64, error){
		"startup": func() (map[string]float64, error) {
			return waitorder.RunStartup(ctx, newCR, sz, waitorder.Order{Priority: waitorder.StartupPriority})
		},
		"noisy": func() (map[string]float64, error) { return waitorder.RunNoisy(ctx, newCR, sz, waitorder.Order{}) },
	} {
		m, err := run()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m["updates"] < float64(sz.Backlog)+m["changes"] || m["changes"] < 1 {
			t.Errorf("%s: %v Updates for %d objects and %v changes", name, m["updates"], sz.Backlog, m["changes"])
		}
	}
	m, err := waitorder.RunHung(ctx, newCR, sz, func(*waitorder.Target) waitorder.Order { return waitorder.Order{} })
	if err != nil {
		t.Fatal(err)
	}
	if m[waitorder.HungFailed] == 0 {
		t.Errorf("hung-target: no Update of the hung target failed: %v", m)
	}
}

// TestCRChangeDuringUpdate checks the cache's compare-and-swap: a change
// made while the object's Update runs is not marked Done by that Update's
// result, but by the next one, which the queue hands out after it.
func TestCRChangeDuringUpdate(t *testing.T) {
	tg := waitorder.NewTarget(0, 1, -1)
	started, release := make(chan uint64, 2), make(chan struct{})
	tg.BeforeUpdate = func(id uint64) { started <- id; <-release }
	sys, err := newCR(context.Background(), waitorder.Setup{Target: tg, Concurrency: 2, Preload: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer sys.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, _ := sys.Touch(0)
	<-started // the first Update runs, held
	second, _ := sys.Touch(0)
	close(release)
	if err := sys.WaitDone(ctx, 0, second); err != nil {
		t.Fatal(err)
	}
	if n := tg.Updates(); n != 2 {
		t.Errorf("%d Updates, want 2: the change during the first must be applied by a second", n)
	}
	if first >= second {
		t.Errorf("revisions %d then %d: a change must move the revision forward", first, second)
	}
	if err := sys.WaitAll(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestCRRefusesFairness checks that the controller-runtime side does not
// silently run without an order it was asked for.
func TestCRRefusesFairness(t *testing.T) {
	s := waitorder.Setup{Target: waitorder.NewTarget(0, 1, -1), Order: waitorder.Order{FairnessKey: waitorder.Tenant}}
	if _, err := newCR(context.Background(), s); err == nil {
		t.Error("newCR accepted a FairnessKey")
	}
}

func TestFlags(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-hung-objects", "8", "-only", "noisy"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	q := waitorder.QuickSizes()
	if o.sizes.HungObjects != 8 || o.sizes.Backlog != q.Backlog || o.sizes.HungWindow != q.HungWindow {
		t.Errorf("-quick with -hung-objects 8: %+v", o.sizes)
	}
	if !o.only.MatchString("noisy-tenant") || o.only.MatchString("hung-target") {
		t.Error("-only noisy matches the wrong workloads")
	}
	for _, args := range [][]string{{"-pairs", "0"}, {"-only", "("}, {"-hung-window", "0s"}, {"-backlog-objects", "0"}, {"extra"}} {
		if _, err := parseFlags(args, &strings.Builder{}); err == nil {
			t.Errorf("parseFlags(%q) succeeded", args)
		}
	}
}

// TestCRInsertDone checks the floor's insert: the objects are in the
// cache, Done, and the queue has nothing to hand out.
func TestCRInsertDone(t *testing.T) {
	sys, err := newCR(context.Background(), waitorder.Setup{Target: waitorder.NewTarget(0, 1, -1), Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := sys.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer sys.Stop()
	sys.InsertDone(0, 10)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sys.WaitDone(ctx, 9, 0); err != nil {
		t.Fatal(err)
	}
	if n := sys.(*crSystem).q.Len(); n != 0 {
		t.Errorf("%d keys queued for objects inserted Done", n)
	}
}

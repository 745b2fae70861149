package main

import (
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tinySizes make every workload run in a fraction of a second, even with
// -race: enough to exercise the harness, far too little to time anything.
func tinySizes() sizes {
	return sizes{
		noopObjects:    2000,
		insertBatch:    500,
		slowObjects:    20,
		slowDelay:      time.Millisecond,
		latencySmall:   100,
		latencyLarge:   1000,
		latencySamples: 10,
		latencyGap:     2 * time.Millisecond,
		trickleSamples: 20,
		bulkObjects:    1000,
		bulkLoads:      1,
		retryObjects:   200,
		retryHeal:      50 * time.Millisecond,
		fullObjects:    1000,
		routesSmall:    200,
		routesLarge:    500,
		runTimeout:     time.Minute,
		syncObjects:    500,
		syncRate:       200,
		syncDuration:   150 * time.Millisecond,
		sourceObjects:  2000,
		sourceFiles:    20,
		fileEdits:      3,
		backlogObjects: 300,
		backlogSamples: 10,
		// Fewer healthy objects than 16 workers of 1 ms can do in the
		// window: the window never runs out of work.
		hungObjects: 4000,
		hungWindow:  50 * time.Millisecond,
		deps:        depsSizes{releaseSamples: 20, forestObjects: 500, forestRoots: 10, edgeObjects: 20_000, chainObjects: 50},
	}
}

// TestWorkloads runs every workload once per variant at tiny sizes and
// checks that each row has a result for both sides. It asserts that the
// harness works, never a timing.
func TestWorkloads(t *testing.T) {
	o := options{sizes: tinySizes(), pairs: 1, only: regexp.MustCompile("")}
	var log strings.Builder
	rows, err := runSuite(o, &log)
	t.Log("\n" + log.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		for side, x := range map[string]float64{"converge": r.Converge, "statedb": r.Statedb} {
			if math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
				t.Errorf("%s: %s result is %v", r.Workload, side, x)
			}
		}
		if r.Runs != 1 {
			t.Errorf("%s: %d runs, want 1", r.Workload, r.Runs)
		}
	}
	// A row's name is its workload's, or starts with it and a slash.
	for _, w := range workloads(o.sizes) {
		if w.skip != nil {
			if err := w.skip(); err != nil {
				// Where CI is set, a skip must not pass (the routes
				// workloads need root, and CI has it).
				if os.Getenv("CI") != "" {
					t.Errorf("CI is set and workload %s was skipped: %v", w.name, err)
				}
				continue
			}
		}
		if !slices.ContainsFunc(rows, func(r row) bool {
			return r.Workload == w.name || strings.HasPrefix(r.Workload, w.name+"/")
		}) {
			t.Errorf("workload %s produced no row", w.name)
		}
	}
}

func TestQuickKeepsExplicitSizes(t *testing.T) {
	o, err := parseFlags([]string{"-quick", "-noop-objects", "7", "-only", "noop"}, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	q := quickSizes()
	if o.noopObjects != 7 {
		t.Errorf("noopObjects = %d, want the explicit 7", o.noopObjects)
	}
	if o.fullObjects != q.fullObjects || o.retryHeal != q.retryHeal || o.trickleSamples != q.trickleSamples || o.bulkObjects != q.bulkObjects {
		t.Errorf("-quick did not shrink the other sizes: %+v", o.sizes)
	}
	if !o.only.MatchString("noop-1m") || o.only.MatchString("full") {
		t.Errorf("-only noop matches the wrong workloads")
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-side", "both"},
		{"-pairs", "0"},
		{"-only", "("},
		{"-full-objects", "0"},
		{"-trickle-samples", "0"},
		{"-bulk-loads", "0"},
		{"-sync-rate", "0"},
		{"-sync-duration", "0s"},
		{"-backlog-objects", "0"},
		{"-hung-window", "0s"},
		{"extra"},
	} {
		if _, err := parseFlags(args, &strings.Builder{}); err == nil {
			t.Errorf("parseFlags(%q) succeeded", args)
		}
	}
}

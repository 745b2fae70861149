package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The failover row re-executes this binary as a replica process.
	if os.Getenv(replicaEnv) != "" {
		os.Exit(replicaMain(os.Args[1:], os.Stderr))
	}
	goleak.VerifyTestMain(m)
}

// TestSmoke runs every row at tiny sizes and checks that the harness
// produces every row with a sane value. It asserts nothing about the
// timings: those belong to a quiet machine, not to CI.
func TestSmoke(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"-json", "-slots", "32", "-drain-timeout", "2s",
		"-failover-runs", "1", "-failover-objects", "60", "-failover-ttl", "2s",
		"-handover-cycles", "1", "-handover-objects", "200", "-handover-churn", "200",
		"-scale-objects", "2000", "-scale-warmup", "200ms", "-scale-pairs", "1",
		"-coordination-objects", "100,1000", "-coordination-window", "1s", "-coordination-summary", "500ms",
		"-limits-max", "1000",
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	got := map[string]row{}
	for line := range strings.Lines(stdout.String()) {
		var r row
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		got[r.Name] = r
	}
	for _, name := range []string{
		"failover/first-op", "failover/all-keys", "failover/slot-claimed",
		"handover/p99", "handover/max",
		"scale-out/3-vs-1", "scale-out/1-replica", "scale-out/3-replicas", "scale-out/bulk-3-vs-1",
		"coordination/100-objects", "coordination/1k-objects",
		"handover/etcd-writes-per-join", "handover/etcd-writes-per-stop", "limits/assign-256-slots-3-members",
	} {
		r, ok := got[name]
		switch {
		case !ok:
			t.Errorf("row %s missing; got %v", name, got)
		case math.IsNaN(r.Value) || math.IsInf(r.Value, 0) || r.Value < 0:
			t.Errorf("row %s: value %v", name, r.Value)
		case r.Unit == "":
			t.Errorf("row %s: no unit", name)
		}
	}
	// Rows that must be positive whatever the machine: something failed
	// over, moved, ran.
	for _, name := range []string{"failover/first-op", "handover/max", "scale-out/1-replica", "scale-out/3-replicas"} {
		if got[name].Value <= 0 {
			t.Errorf("row %s: %v, want > 0", name, got[name].Value)
		}
	}
	// A failover cannot beat the lease: the killed replica's slots are
	// free only once its lease expired.
	if v := got["failover/first-op"].Value; v < 1000 {
		t.Errorf("failover/first-op %v ms: before the 2s lease could expire", v)
	}
}

func TestFlags(t *testing.T) {
	var stderr bytes.Buffer
	for _, args := range [][]string{
		{"-only", "("},
		{"-coordination-objects", "10,x"},
		{"-handover-cycles", "0"},
		{"extra"},
	} {
		if _, err := parseFlags(args, &stderr); err == nil {
			t.Errorf("parseFlags(%q): no error", args)
		}
	}
	o, err := parseFlags([]string{"-quick", "-failover-runs", "2"}, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if o.failoverRuns != 2 || o.failoverObjects != 500 || len(o.coordObjects) != 2 || o.coordObjects[1] != 100000 {
		t.Errorf("-quick with -failover-runs 2: %+v", o)
	}
}

package waitorder

import (
	"context"
	"math"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/converge-go/converge/benchmarks/internal/trickle"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// checkMetrics fails t unless m has every metric in names, each a number
// and not negative.
func checkMetrics(t *testing.T, m map[string]float64, names ...string) {
	t.Helper()
	for _, name := range names {
		x, ok := m[name]
		if !ok || math.IsNaN(x) || math.IsInf(x, 0) || x < 0 {
			t.Errorf("%s = %v (present: %v)", name, x, ok)
		}
	}
}

// TestStartup runs startup+changes on each side, converge with Priority
// and without, and checks that every metric is there and the changes were
// measured.
func TestStartup(t *testing.T) {
	for name, c := range map[string]struct {
		f     Factory
		order Order
	}{
		"converge-priority": {NewConverge, Order{Priority: StartupPriority}},
		"converge-fifo":     {NewConverge, Order{}},
		"statedb":           {NewStatedb, Order{}},
	} {
		t.Run(name, func(t *testing.T) {
			m, err := RunStartup(context.Background(), c.f, TinySizes(), c.order)
			if err != nil {
				t.Fatal(err)
			}
			checkMetrics(t, m, trickle.P50, trickle.P99, AloneP50, AloneP99, LoadSeconds, AloneLoad)
			if m[trickle.Changes] < 1 || m["updates"] < float64(TinySizes().Backlog) {
				t.Errorf("%v changes and %v Updates", m[trickle.Changes], m["updates"])
			}
		})
	}
}

// TestNoisy runs noisy-tenant on converge, with the tenant as its
// FairnessKey and without, and checks its metrics.
func TestNoisy(t *testing.T) {
	for _, order := range []Order{{FairnessKey: Tenant}, {}} {
		m, err := RunNoisy(context.Background(), NewConverge, TinySizes(), order)
		if err != nil {
			t.Fatal(err)
		}
		checkMetrics(t, m, trickle.P50, trickle.P99, AloneP50, AloneP99, LoadSeconds)
	}
}

// TestHung runs hung-target on converge with a cap per target and
// without, and checks that its metrics are there and the hung target's
// Updates hung and failed (each phase waits for a healthy Update to
// succeed before it measures).
func TestHung(t *testing.T) {
	sz := TinySizes()
	capped := func(t *Target) Order { return HungOrder(t, sz.Concurrency/Targets) }
	for name, order := range map[string]func(*Target) Order{"capped": capped, "uncapped": func(*Target) Order { return Order{} }} {
		m, err := RunHung(context.Background(), NewConverge, sz, order)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		checkMetrics(t, m, Healthy, HealthyAlone, HungFailed)
		if m[HungFailed] == 0 {
			t.Errorf("%s: no Update of the hung target failed", name)
		}
	}
}

// TestStatedbRefusesOrder checks that the statedb side does not silently
// run first in, first out when asked for an order it does not have.
func TestStatedbRefusesOrder(t *testing.T) {
	s := Setup{Target: NewTarget(0, 1, -1), Order: Order{Priority: StartupPriority}}
	if _, err := NewStatedb(context.Background(), s); err == nil {
		t.Error("NewStatedb accepted a Priority")
	}
}

// TestTarget checks the target's routing, hanging and counting.
func TestTarget(t *testing.T) {
	tg := NewTarget(0, Targets, Targets-1)
	if tg.Of(7) != 3 || tg.Key(5) != "target-1" {
		t.Errorf("Of(7) = %d, Key(5) = %q", tg.Of(7), tg.Key(5))
	}
	if err := tg.Update(context.Background(), 4); err != nil || tg.Done(0) != 1 {
		t.Errorf("Update(4) = %v, Done(0) = %d", err, tg.Done(0))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := tg.Update(ctx, 3); err == nil || tg.Failed() != 1 || tg.Updates() != 1 {
		t.Errorf("hung Update(3) = %v, Failed %d, Updates %d", err, tg.Failed(), tg.Updates())
	}
}

// TestFloor checks the floor phase on both table sides: the backlog
// inserted Done gives the system nothing to do (the target sees the
// changes' Updates, none of the backlog's), and the changes are measured.
// RunStartup reports it only when Sizes.Floor asks.
func TestFloor(t *testing.T) {
	sz := TinySizes()
	for name, f := range map[string]Factory{"converge": NewConverge, "statedb": NewStatedb} {
		tg := NewTarget(0, 1, -1)
		s := Setup{Target: tg, Concurrency: sz.Concurrency, Preload: Pool}
		p99, err := floorChanges(context.Background(), f, s, sz, StartupRate, 50*time.Millisecond)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if n := tg.Updates(); n < 1 || n >= int64(sz.Backlog) {
			t.Errorf("%s: %d Updates: want the changes' only, fewer than the %d objects inserted Done", name, n, sz.Backlog)
		}
		if math.IsNaN(p99) || p99 <= 0 {
			t.Errorf("%s: floor p99 %v", name, p99)
		}
	}
	for _, floor := range []bool{false, true} {
		sz.Floor = floor
		m, err := RunStartup(context.Background(), NewConverge, sz, Order{Priority: StartupPriority})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := m[FloorP99]; ok != floor {
			t.Errorf("Floor %v: %s reported: %v", floor, FloorP99, ok)
		}
	}
}

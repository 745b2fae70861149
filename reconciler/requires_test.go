package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// device is a row of another table, one no reconciler of the tests
// writes: what a test object requires (Config.Requires).
type device struct {
	Name string `yaml:"name"`
	Up   bool   `yaml:"up"`
}

var deviceIndex = statedb.Index[*device, string]{
	Name:       "name",
	FromObject: func(d *device) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.String(d.Name)) },
	FromKey:    statedbindex.String,
	Unique:     true,
}

// requiredDevices reads what a test object requires from its value:
// "v@eth0,eth1" requires devices eth0 and eth1 (before any '>' that
// names its dependencies).
func requiredDevices(o *testObject) []statedbindex.Key {
	v, _, _ := strings.Cut(o.Value, ">")
	_, names, ok := strings.Cut(v, "@")
	if !ok || names == "" {
		return nil
	}
	var keys []statedbindex.Key
	for n := range strings.SplitSeq(names, ",") {
		keys = append(keys, statedbindex.String(n))
	}
	return keys
}

func (d *device) TableHeader() []string { return []string{"Name", "Up"} }

func (d *device) TableRow() []string { return []string{d.Name, fmt.Sprint(d.Up)} }

func deviceUp(d *device) bool { return d.Up }

// newTable registers a table of devices named name in f's database.
func newDeviceTable(t testing.TB, f *fixture, name string) statedb.RWTable[*device] {
	t.Helper()
	tbl, err := statedb.NewTable(f.db, name, deviceIndex)
	if err != nil {
		t.Fatal(err)
	}
	return tbl
}

func putDevices(t testing.TB, f *fixture, tbl statedb.RWTable[*device], devs ...*device) {
	t.Helper()
	wtxn := f.db.WriteTxn(tbl)
	for _, d := range devs {
		if _, _, err := tbl.Insert(wtxn, d); err != nil {
			t.Fatal(err)
		}
	}
	wtxn.Commit()
}

func deleteDevices(t testing.TB, f *fixture, tbl statedb.RWTable[*device], names ...string) {
	t.Helper()
	wtxn := f.db.WriteTxn(tbl)
	for _, n := range names {
		if _, _, err := tbl.Delete(wtxn, &device{Name: n}); err != nil {
			t.Fatal(err)
		}
	}
	wtxn.Commit()
}

// requiringDevices runs fn with a reconciler whose objects require
// devices (up) in a table named "devices", which it passes on.
func requiringDevices(t *testing.T, fn func(f *fixture, devs statedb.RWTable[*device])) {
	var devs statedb.RWTable[*device]
	inBubbleWith(t, func(f *fixture, cfg *reconciler.Config[*testObject]) {
		devs = newDeviceTable(t, f, "devices")
		cfg.Requires = []reconciler.Requirement[*testObject]{reconciler.Requires(devs, requiredDevices, deviceUp)}
	}, func(f *fixture, _ *timedOps) { fn(f, devs) })
}

// TestRequiresGates: an Update starts only once every row it requires in
// another table is there and ready; until then the key is Blocked (no
// attempt, no failure) and Explain names the row and why. The release
// takes no time: the row's insert is read in the step after it, woken by
// the table's watch channel; nothing polls.
func TestRequiresGates(t *testing.T) {
	requiringDevices(t, func(f *fixture, devs statedb.RWTable[*device]) {
		tg := f.target("")
		insert(t, f, pendingObject("route", "v@eth0"))
		synctest.Wait()
		time.Sleep(time.Hour) // nothing polls: an hour brings no attempt
		synctest.Wait()
		if h := tg.History(); len(h) != 0 {
			t.Fatalf("operations ran for a key whose required row is not there: %v", h)
		}
		e := explainKey(t, f, "route")
		if e.State != reconciler.KeyBlocked || e.Reason != `blocked on devices row eth0: not in the table` {
			t.Fatalf("Explain of a blocked key: %s %q", e.State, e.Reason)
		}
		r, _ := f.reconciler("")
		if s := r.Status(); s.Blocked != 1 || s.Objects.Error != 0 || s.Retries != 0 {
			t.Fatalf("Status: blocked %d, errors %d, retries %d; want 1, 0, 0", s.Blocked, s.Objects.Error, s.Retries)
		}

		// There, but not ready: still blocked, and Explain says so.
		putDevices(t, f, devs, &device{Name: "eth0"})
		synctest.Wait()
		if e := explainKey(t, f, "route"); e.State != reconciler.KeyBlocked || e.Reason != `blocked on devices row eth0: not ready` {
			t.Fatalf("Explain, row not ready: %s %q", e.State, e.Reason)
		}
		if h := tg.History(); len(h) != 0 {
			t.Fatalf("operations ran while the required row was not ready: %v", h)
		}

		start := time.Now()
		putDevices(t, f, devs, &device{Name: "eth0", Up: true})
		synctest.Wait()
		if tableStatus(f, "route").Kind != reconciler.StatusKindDone {
			t.Fatalf("route not Done once its device is up: %v", explainKey(t, f, "route"))
		}
		if d := time.Since(start); d != 0 {
			t.Fatalf("release took %s of bubble time: something polled", d)
		}
		if h := tg.History(); !slices.Equal(h, []string{"update(route)"}) {
			t.Fatalf("history %v, want one update", h)
		}
	})
}

// TestRequiresOnlyGates: a required row only gates. Once the Update ran,
// the row's change or removal neither runs the object again nor deletes
// it; and a Delete never waits for another table.
func TestRequiresOnlyGates(t *testing.T) {
	requiringDevices(t, func(f *fixture, devs statedb.RWTable[*device]) {
		tg := f.target("")
		putDevices(t, f, devs, &device{Name: "eth0", Up: true})
		insert(t, f, pendingObject("route", "v@eth0"))
		synctest.Wait()
		if tableStatus(f, "route").Kind != reconciler.StatusKindDone {
			t.Fatalf("route not Done with its device up: %v", explainKey(t, f, "route"))
		}
		putDevices(t, f, devs, &device{Name: "eth0"})
		synctest.Wait()
		deleteDevices(t, f, devs, "eth0")
		synctest.Wait()
		if h := tg.History(); !slices.Equal(h, []string{"update(route)"}) {
			t.Fatalf("the device's change or removal ran the route: %v", h)
		}
		deleteKeys(t, f, "route")
		synctest.Wait()
		if h := tg.History(); !slices.Equal(h, []string{"update(route)", "delete(route)"}) {
			t.Fatalf("the route's delete waited for its missing device: %v", h)
		}
	})
}

// TestRequiresGoneWhileQueued: a row that goes away before the Update
// starts blocks it again. One target at a time (TargetConcurrency 1): the
// route is read and queued, its device there, behind a stuck Update on
// the same target; the device is deleted meanwhile; once the target is
// free, the route waits for its device again instead of starting.
func TestRequiresGoneWhileQueued(t *testing.T) {
	var devs statedb.RWTable[*device]
	inBubbleWith(t, func(f *fixture, cfg *reconciler.Config[*testObject]) {
		devs = newDeviceTable(t, f, "devices")
		cfg.Requires = []reconciler.Requirement[*testObject]{reconciler.Requires(devs, requiredDevices, nil)}
		cfg.Concurrency, cfg.TargetConcurrency = 2, 1
		cfg.TargetKey = func(*testObject) string { return "one" }
	}, func(f *fixture, _ *timedOps) {
		tg := f.target("")
		tg.SetFault("blocker", fake.Fault{Mode: fake.ModeStuck})
		insert(t, f, pendingObject("blocker", "b"))
		synctest.Wait()
		putDevices(t, f, devs, &device{Name: "eth0"})
		insert(t, f, pendingObject("route", "v@eth0"))
		synctest.Wait()
		if e := explainKey(t, f, "route"); e.State != reconciler.KeyQueued {
			t.Fatalf("route %s (%q), want Queued behind the stuck Update", e.State, e.Reason)
		}
		deleteDevices(t, f, devs, "eth0")
		synctest.Wait()
		tg.Heal("blocker")
		synctest.Wait()
		if h := tg.History(); slices.Contains(h, "update(route)") {
			t.Fatalf("an Update started after its required row went away: %v", h)
		}
		if e := explainKey(t, f, "route"); e.State != reconciler.KeyBlocked || e.Reason != `blocked on devices row eth0: not in the table` {
			t.Fatalf("Explain: %s %q", e.State, e.Reason)
		}
		putDevices(t, f, devs, &device{Name: "eth0"})
		synctest.Wait()
		if tableStatus(f, "route").Kind != reconciler.StatusKindDone {
			t.Fatalf("route not Done once its device came back: %v", explainKey(t, f, "route"))
		}
	})
}

// TestRequiresSeveralTables: with requirements on two tables, a key waits
// for a row of each, whichever table changes last releases it, and a
// change of either table wakes the loop.
func TestRequiresSeveralTables(t *testing.T) {
	var devs, addrs statedb.RWTable[*device]
	inBubbleWith(t, func(f *fixture, cfg *reconciler.Config[*testObject]) {
		devs, addrs = newDeviceTable(t, f, "devices"), newDeviceTable(t, f, "addresses")
		cfg.Requires = []reconciler.Requirement[*testObject]{
			reconciler.Requires(devs, requiredDevices, nil),
			reconciler.Requires(addrs, func(o *testObject) []statedbindex.Key { return []statedbindex.Key{statedbindex.String("a-" + o.ID)} }, nil),
		}
	}, func(f *fixture, _ *timedOps) {
		tg := f.target("")
		insert(t, f, pendingObject("r1", "v@eth0"), pendingObject("r2", "v@eth1"))
		synctest.Wait()
		putDevices(t, f, addrs, &device{Name: "a-r1"})
		putDevices(t, f, devs, &device{Name: "eth1"})
		synctest.Wait()
		for _, k := range []string{"r1", "r2"} {
			if e := explainKey(t, f, k); e.State != reconciler.KeyBlocked {
				t.Fatalf("%s not blocked with one of its two rows missing: %s", k, e.State)
			}
		}
		if e := explainKey(t, f, "r2"); e.Reason != `blocked on addresses row a-r2: not in the table` {
			t.Fatalf("Explain r2: %q", e.Reason)
		}
		putDevices(t, f, devs, &device{Name: "eth0"})  // r1's last row: in the first table
		putDevices(t, f, addrs, &device{Name: "a-r2"}) // r2's: in the second
		synctest.Wait()
		for _, k := range []string{"r1", "r2"} {
			if tableStatus(f, k).Kind != reconciler.StatusKindDone {
				t.Fatalf("%s not Done with both its rows there: %v", k, explainKey(t, f, k))
			}
		}
		if n := len(tg.History()); n != 2 {
			t.Fatalf("%d operations, want 2: %v", n, tg.History())
		}
	})
}

// TestRequiresWithDependsOn: a key that both depends on a key of its own
// table and requires a row of another waits for both, in either order.
func TestRequiresWithDependsOn(t *testing.T) {
	var devs statedb.RWTable[*device]
	inBubbleWith(t, func(f *fixture, cfg *reconciler.Config[*testObject]) {
		devs = newDeviceTable(t, f, "devices")
		cfg.DependsOn = dependsOn
		cfg.Requires = []reconciler.Requirement[*testObject]{reconciler.Requires(devs, requiredDevices, nil)}
	}, func(f *fixture, _ *timedOps) {
		tg := f.target("")
		insert(t, f, pendingObject("route", "v@eth0>nexthop"))
		synctest.Wait()
		if e := explainKey(t, f, "route"); e.Reason != `blocked on nexthop: not in the table` {
			t.Fatalf("Explain: %q", e.Reason)
		}
		insert(t, f, pendingObject("nexthop", "n"))
		synctest.Wait()
		if e := explainKey(t, f, "route"); e.State != reconciler.KeyBlocked || e.Reason != `blocked on devices row eth0: not in the table` {
			t.Fatalf("Explain once its dependency is Done: %s %q", e.State, e.Reason)
		}
		putDevices(t, f, devs, &device{Name: "eth0"})
		synctest.Wait()
		if h := tg.History(); !slices.Equal(h, []string{"update(nexthop)", "update(route)"}) {
			t.Fatalf("history %v", h)
		}
	})
}

// TestRequiresConfig: what Config.Requires refuses, each error naming the
// field: a table of another database among them (statedb reads a table
// by its place in its database: it would read the wrong one).
func TestRequiresConfig(t *testing.T) {
	f, _ := startFixture(t, time.Minute)
	devs := newDeviceTable(t, f, "devices")
	elsewhere, err := statedb.NewTable(statedb.New(), "devices", deviceIndex)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		mod  func(*reconciler.Config[*testObject])
		want string
	}{
		{"nil", func(c *reconciler.Config[*testObject]) { c.Requires = []reconciler.Requirement[*testObject]{nil} }, "Config.Requires[0] is nil"},
		{"no keys", func(c *reconciler.Config[*testObject]) {
			c.Requires = []reconciler.Requirement[*testObject]{reconciler.Requires[*testObject](devs, nil, nil)}
		}, "has no keys function"},
		{"no table", func(c *reconciler.Config[*testObject]) {
			c.Requires = []reconciler.Requirement[*testObject]{reconciler.Requires[*testObject, *device](nil, requiredDevices, nil)}
		}, "has no table"},
		{"another database", func(c *reconciler.Config[*testObject]) {
			c.Requires = []reconciler.Requirement[*testObject]{reconciler.Requires(statedb.Table[*device](elsewhere), requiredDevices, nil)}
		}, "table devices is not registered in the reconciler's database"},
		{"own table", func(c *reconciler.Config[*testObject]) {
			c.Requires = []reconciler.Requirement[*testObject]{reconciler.Requires(statedb.Table[*testObject](f.table),
				func(*testObject) []statedbindex.Key { return nil }, nil)}
		}, "use Config.DependsOn"},
	}
	for _, tc := range cases {
		cfg := testConfig(f, &testOps{target: f.target(""), getStatus: func(o *testObject) reconciler.Status { return o.Status }},
			reconciler.Config[*testObject]{})
		tc.mod(&cfg)
		_, err := reconciler.New(cfg, f.params)
		if !errors.Is(err, reconciler.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want ErrInvalidConfig saying %q", tc.name, err, tc.want)
		}
	}
}

// TestRequiresHealthAndWaits: a key waiting for a row of another table is
// reported as one waiting for a dependency is: the waits do not return
// and say which row, and health turns Degraded after a minute, naming it,
// and OK again once the row comes.
func TestRequiresHealthAndWaits(t *testing.T) {
	requiringDevices(t, func(f *fixture, devs statedb.RWTable[*device]) {
		wtxn := f.db.WriteTxn(f.table)
		f.table.Insert(wtxn, pendingObject("route", "v@eth0"))
		rev := f.table.Revision(wtxn)
		wtxn.Commit()
		r, _ := f.reconciler("")
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, _, err := r.WaitUntilReconciled(ctx, rev); err == nil || !strings.Contains(err.Error(), "blocked on devices row eth0: not in the table") {
			t.Fatalf("WaitUntilReconciled: %v", err)
		}
		level := func() (cell.Level, string) {
			h := f.jobHealth("reconcile")
			if h == nil {
				t.Fatal("no health for the reconciler's job")
			}
			h.Lock()
			defer h.Unlock()
			return h.Level, h.Status + ": " + fmt.Sprint(h.Error)
		}
		time.Sleep(time.Second) // past the wait's minute, and another: over a minute blocked
		synctest.Wait()
		if l, msg := level(); l != cell.StatusDegraded || !strings.Contains(msg, "route: blocked on devices row eth0: not in the table") {
			t.Fatalf("health %s %q after a minute blocked", l, msg)
		}
		putDevices(t, f, devs, &device{Name: "eth0", Up: true})
		ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
		defer cancel2()
		if err := r.WaitUntilSettled(ctx2, rev); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if l, msg := level(); l != cell.StatusOK {
			t.Fatalf("health %s %q once released", l, msg)
		}
	})
}

// TestRequiresDoneForAnotherReconciler: a requirement's ready may read
// the row's status, so that a route waits for its device to be Done for
// the devices' own reconciler: Blocked while the device is Pending or in
// Error, released by that reconciler's Done write.
func TestRequiresDoneForAnotherReconciler(t *testing.T) {
	var devs statedb.RWTable[*testObject]
	inBubbleWith(t, func(f *fixture, cfg *reconciler.Config[*testObject]) {
		var err error
		if devs, err = statedb.NewTable(f.db, "test-devices", idIndex, statusIndex); err != nil {
			t.Fatal(err)
		}
		devCfg := testConfig(f, &testOps{target: f.target("devices"), getStatus: func(o *testObject) reconciler.Status { return o.Status }},
			reconciler.Config[*testObject]{Name: "devices", RoundRateLimiter: rate.NewLimiter(rate.Inf, 1),
				FullReconciliationInterval: reconciler.Off, RefreshInterval: reconciler.Off})
		devCfg.Table = devs
		f.reconcilers["devices"] = mustNew(t, f, devCfg)
		cfg.Requires = []reconciler.Requirement[*testObject]{reconciler.Requires(devs, requiredDevices,
			func(d *testObject) bool { return d.Status.Kind == reconciler.StatusKindDone })}
	}, func(f *fixture, _ *timedOps) {
		tg, devTarget := f.target(""), f.target("devices")
		insert(t, f, pendingObject("route", "v@eth0"))
		devTarget.SetFault("eth0", fake.Fault{Mode: fake.ModePermanent})
		wtxn := f.db.WriteTxn(devs)
		devs.Insert(wtxn, pendingObject("eth0", "up"))
		wtxn.Commit()
		synctest.Wait()
		if d, _, _ := devs.Get(f.db.ReadTxn(), idIndex.Query("eth0")); d.Status.Kind != reconciler.StatusKindError {
			t.Fatalf("device %+v, want Error", d)
		}
		if e := explainKey(t, f, "route"); e.State != reconciler.KeyBlocked || e.Reason != `blocked on test-devices row eth0: not ready` {
			t.Fatalf("route while its device is in Error: %s %q", e.State, e.Reason)
		}
		devTarget.Heal("eth0")
		wtxn = f.db.WriteTxn(devs)
		devs.Insert(wtxn, pendingObject("eth0", "up again"))
		wtxn.Commit()
		synctest.Wait()
		if tableStatus(f, "route").Kind != reconciler.StatusKindDone {
			d, _, _ := devs.Get(f.db.ReadTxn(), idIndex.Query("eth0"))
			t.Fatalf("route not Done once its device is Done: %q; device %+v", explainKey(t, f, "route").Reason, d)
		}
		if h := tg.History(); !slices.Equal(h, []string{"update(route)"}) {
			t.Fatalf("history %v", h)
		}
	})
}

package source_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/source"
)

var itemKeys = []string{"i0.yaml", "i1.yaml", "i2.yaml", "i3.yaml", "i4.yaml", "i5.yaml"}

// randomValue is a good value: a few objects, with contents.
func (m *model) randomValue() string {
	var fs []string
	for _, o := range objKeys {
		if m.rng.IntN(3) == 0 {
			fs = append(fs, o+"="+string(rune('a'+m.rng.IntN(3))))
		}
	}
	if len(fs) == 0 {
		return "-"
	}
	return strings.Join(fs, " ")
}

func (m *model) randomKey(present bool) (string, bool) {
	var ks []string
	for _, k := range itemKeys {
		if _, ok := m.items[k]; ok == present {
			ks = append(ks, k)
		}
	}
	if len(ks) == 0 {
		return "", false
	}
	return ks[m.rng.IntN(len(ks))], true
}

// forget notes that key's objects, as this process knew them, are gone
// from it (a neverRd item's old objects may then go too: documented).
func (m *model) forget(key string) {
	for _, ov := range m.known[key] {
		m.tainted[ov.key] = true
	}
	delete(m.known, key)
}

// set changes an item in the model and in the world.
func (m *model) set(key, v string) {
	_, existed := m.items[key]
	m.items[key] = v
	m.setItem(key, v)
	ovs, err := parse(v)
	if err != nil {
		if !existed || m.neverRd[key] {
			m.neverRd[key] = true
		}
		return
	}
	old := m.known[key]
	for _, ov := range old {
		if !slices.ContainsFunc(ovs, func(n objVal) bool { return n.key == ov.key }) {
			m.tainted[ov.key] = true
		}
	}
	m.known[key] = ovs
	m.lastGood[key] = nil
	for _, ov := range ovs {
		m.lastGood[key] = append(m.lastGood[key], ov.key)
		delete(m.tainted, ov.key)
	}
	delete(m.neverRd, key)
}

func (m *model) remove(key string) {
	m.deleteItem(key)
	m.forget(key)
	delete(m.items, key)
	delete(m.lastGood, key)
	delete(m.neverRd, key)
}

// step does one random thing and says what.
func (m *model) step() string {
	switch r := m.rng.IntN(100); {
	case r < 35:
		k, _ := m.randomKey(m.rng.IntN(2) == 0)
		if k == "" {
			k = itemKeys[0]
		}
		if m.items[k] == "fifo" {
			m.remove(k)
			return "remove FIFO " + k
		}
		v := m.randomValue()
		m.set(k, v)
		return fmt.Sprintf("set %s %q", k, v)
	case r < 47:
		k, _ := m.randomKey(m.rng.IntN(3) > 0)
		if k == "" || m.items[k] == "fifo" {
			return "nothing"
		}
		m.set(k, "bad")
		return "break " + k
	case r < 55:
		k, ok := m.randomKey(true)
		if !ok {
			return "nothing"
		}
		m.remove(k)
		return "delete " + k
	case r < 65:
		return m.rename()
	case r < 75:
		return m.apiToggle()
	case r < 82:
		return m.entryOrOutage()
	case r < 92:
		m.stop()
		m.start()
		return "restart"
	}
	return "nothing"
}

// rename moves an item to a free key.
func (m *model) rename() string {
	k, ok := m.randomKey(true)
	to, free := m.randomKey(false)
	if !ok || !free || m.items[k] == "fifo" {
		return "nothing"
	}
	v := m.items[k]
	if m.backend == "dir" {
		if err := os.Rename(m.path(k), m.path(to)); err != nil {
			m.t.Fatal(err)
		}
		m.setModelOnly(to, v)
	} else {
		m.st.Delete(k)
		m.st.Set(to, v)
		m.setModelOnly(to, v)
	}
	m.forget(k)
	delete(m.items, k)
	delete(m.lastGood, k)
	delete(m.neverRd, k)
	return fmt.Sprintf("rename %s %s", k, to)
}

// apiToggle makes the api take an object's row over, or give it back.
func (m *model) apiToggle() string {
	o := objKeys[m.rng.IntN(len(objKeys))]
	wtxn := m.f.db.WriteTxn(m.f.table)
	if m.api[o] {
		m.f.table.Delete(wtxn, &obj{Key: o})
		delete(m.api, o)
		m.tainted[o] = true // the api removes its object (documented)
	} else {
		m.f.table.Insert(wtxn, &obj{Key: o, Value: "api", Owner: "api", Status: pending(&obj{}).Status})
		m.api[o] = true
	}
	wtxn.Commit()
	m.src.Resync() // the periodic resync, made deterministic
	return fmt.Sprintf("api holds %s: %v", o, m.api[o])
}

// entryOrOutage puts a FIFO where a manifest could be (dir), or cuts the
// store off for one list (store).
func (m *model) entryOrOutage() string {
	if m.backend == "dir" {
		k, ok := m.randomKey(false)
		if !ok {
			return "nothing"
		}
		if err := syscall.Mkfifo(m.path(k), 0o644); err != nil {
			m.t.Fatal(err)
		}
		m.items[k] = "fifo"
		m.neverRd[k] = true
		return "FIFO " + k
	}
	m.mu.Lock()
	m.outage = true
	m.mu.Unlock()
	m.src.Resync()
	waitStatus(m.t, m.src, "outage seen", func(s source.StatusSnapshot) bool { return !s.Healthy() })
	m.mu.Lock()
	m.outage = false
	m.mu.Unlock()
	return "store outage"
}

// setModelOnly records a moved item's value as a new key's.
func (m *model) setModelOnly(key, v string) {
	m.items[key] = v
	if v == "fifo" {
		m.neverRd[key] = true
		return
	}
	ovs, err := parse(v)
	if err != nil {
		m.neverRd[key] = true
		return
	}
	m.known[key] = ovs
	m.lastGood[key] = nil
	for _, ov := range ovs {
		m.lastGood[key] = append(m.lastGood[key], ov.key)
	}
}

// expected is the table the model predicts: key -> value@owner.
func (m *model) expected() map[string]string {
	out := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(m.known)) {
		for _, ov := range m.known[k] {
			if _, ok := out[ov.key]; !ok {
				out[ov.key] = ov.val + "@s"
			}
		}
	}
	for o := range m.api {
		out[o] = "api@api"
	}
	return out
}

// healthy is what health must say: nothing fails, no object has two
// producers, no producer's object is the api's.
func (m *model) healthy() bool {
	producers := map[string]int{}
	for k, v := range m.items {
		if v == "bad" || v == "fifo" {
			return false
		}
		for _, ov := range m.known[k] {
			producers[ov.key]++
			if producers[ov.key] > 1 || m.api[ov.key] {
				return false
			}
		}
	}
	return true
}

func (f *fixture) rows(txn statedb.ReadTxn) map[string]string {
	out := map[string]string{}
	for o := range f.table.All(txn) {
		out[o.Key] = o.Value + "@" + o.Owner
	}
	return out
}

// check waits for the agent to settle and checks the invariants.
func (m *model) check(what string) {
	t := m.t
	t.Helper()
	// The source has taken in the world as the step left it: events
	// alone could still be in flight, and coalescing would skip states
	// the model went through. A relist commits the events it has first.
	n := m.src.Status().Relists
	m.src.Resync()
	waitStatus(t, m.src, what+": relisted", func(s source.StatusSnapshot) bool { return s.Relists > n })
	want := m.expected()
	var got map[string]string
	m.f.waitTableOr(what+": table as the model says "+fmt.Sprint(want), func(txn statedb.ReadTxn) bool {
		got = m.f.rows(txn)
		return maps.Equal(got, want)
	}, func() string { return fmt.Sprintf("the table holds %v; the items are %v", got, m.items) })
	ctx, cancel := context.WithTimeout(m.f.ctx, 30*time.Second)
	defer cancel()
	if err := m.rec.WaitUntilSettled(ctx, m.f.table.Revision(m.f.db.ReadTxn())); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	target := m.tg.snapshot()
	for o, v := range want {
		if target[o] != strings.Split(v, "@")[0] {
			t.Fatalf("%s: target %v, table %v: %s not reconciled", what, target, want, o)
		}
	}
	for k := range m.items {
		req := m.lastGood[k]
		for _, o := range req {
			if _, ok := target[o]; !ok && !(m.neverRd[k] && m.tainted[o]) {
				t.Fatalf("%s: %s is missing from the target %v although item %s (%q) yields it", what, o, target, k, m.items[k])
			}
		}
	}
	// The table is initialized once no item fails unread, and stays so
	// until the process ends.
	if len(m.neverRd) == 0 {
		m.inited = true
	}
	wantInit := m.inited
	wantHealthy := m.healthy()
	waitStatus(t, m.src, fmt.Sprintf("%s: initialized=%v healthy=%v", what, wantInit, wantHealthy), func(s source.StatusSnapshot) bool {
		return s.Initialized == wantInit && s.Healthy() == wantHealthy && s.Objects == m.held()
	})
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.faults) > 0 {
		t.Fatalf("%s: %s", what, strings.Join(m.faults, "; "))
	}
}

// held is how many rows the source holds: the model's objects not the api's.
func (m *model) held() int {
	n := 0
	for _, v := range m.expected() {
		if strings.HasSuffix(v, "@s") {
			n++
		}
	}
	return n
}

func (m *model) run(steps int) {
	m.start()
	defer func() { m.stop() }()
	m.check("start")
	for i := range steps {
		what := fmt.Sprintf("step %d: %s", i, m.step())
		m.t.Log(what)
		m.check(what)
	}
	// The faults stop: every item is good, the api gives its rows back,
	// one more restart; the target is the good items' objects.
	for k, v := range m.items {
		if v == "fifo" {
			m.remove(k)
		} else if v == "bad" {
			m.set(k, m.randomValue())
		}
	}
	wtxn := m.f.db.WriteTxn(m.f.table)
	for o := range m.api {
		m.f.table.Delete(wtxn, &obj{Key: o})
	}
	wtxn.Commit()
	clear(m.api)
	m.stop()
	m.start()
	m.check("faults over")
	want := map[string]string{}
	for o, v := range m.expected() {
		want[o] = strings.Split(v, "@")[0]
	}
	deadline := time.Now().Add(30 * time.Second)
	for !maps.Equal(m.tg.snapshot(), want) {
		if time.Now().After(deadline) {
			m.t.Fatalf("target %v, want the good items' objects %v", m.tg.snapshot(), want)
		}
		m.rec.TriggerFullReconciliation()
		time.Sleep(5 * time.Millisecond)
	}
}

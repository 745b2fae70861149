package reconciler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// opRecord is what the model's operations did, and when: for the aging
// bound (checkAgingAll).
type opRecord struct {
	mu      sync.Mutex
	wrote   map[string]time.Time // key=value -> when written
	started map[string]time.Time // key=value -> when its first Update began
	ops     []opSpan
}

// opSpan is one operation: on which key and target, from when to when
// (zero: still running).
type opSpan struct {
	key, target string
	from, to    time.Time
}

func newOpRecord() *opRecord {
	return &opRecord{wrote: map[string]time.Time{}, started: map[string]time.Time{}}
}

// wrap records ops' operations; target says an object's TargetKey.
func (rec *opRecord) wrap(ops reconciler.Operations[*testObject], target func(*testObject) string) reconciler.Operations[*testObject] {
	return recordedOps{Operations: ops, rec: rec, target: target}
}

func (rec *opRecord) written(key, value string) {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	rec.wrote[key+"="+value] = time.Now()
}

// begin records an operation on key (an Update of value, or a Delete when
// value is "") beginning now; the func returned records its end.
func (rec *opRecord) begin(key, value, target string) func() {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if v := key + "=" + value; value != "" {
		if _, ok := rec.started[v]; !ok {
			rec.started[v] = time.Now()
		}
	}
	rec.ops = append(rec.ops, opSpan{key: key, target: target, from: time.Now()})
	i := len(rec.ops) - 1
	return func() {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		rec.ops[i].to = time.Now()
	}
}

// checkAgingAll checks MaxWait's promise on what ran, between any two
// versions: one written after another is never started first once the
// earlier one has waited MaxWait and a round's slack since it became
// ready (written, or its key freed by the earlier attempt running or
// handed out when it was),
// unless, just before the later one started, the earlier one's target was
// at its cap; or a restart or ownership flip came between the earlier
// one's write and its start (breaks).
func (rec *opRecord) checkAgingAll(t *testing.T, c modelConfig, breaks []time.Time) {
	t.Helper()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	// slack: what may start ahead of an overdue version once it is
	// overdue: the operation running on each worker and the two queued
	// beside them (the ordered lookahead), each up to 2ms.
	const slack = 8 * time.Millisecond
	type ver struct {
		name, key, target   string
		wrote, ready, start time.Time
	}
	var vers []ver
	for v, start := range rec.started {
		key, _, _ := strings.Cut(v, "=")
		wrote, ok := rec.wrote[v]
		if !ok || crosses(breaks, wrote, start) {
			continue
		}
		u := ver{name: v, key: key, wrote: wrote, ready: wrote, start: start}
		for _, op := range rec.ops {
			if op.key != key {
				continue
			}
			u.target = op.target
			if op.from.Before(start) && op.to.After(u.ready) {
				// An earlier attempt on the key, running or handed out
				// when it was written, kept it busy until it returned.
				u.ready = op.to
			}
		}
		vers = append(vers, u)
	}
	for _, u := range vers {
		for _, v := range vers {
			if !v.wrote.After(u.wrote) || !v.start.Before(u.start) || v.start.Sub(u.ready) <= c.maxWait+slack {
				continue
			}
			if c.targetMod > 0 && rec.cappedWithin(u.target, v.start.Add(-slack), v.start, c.cap) {
				continue
			}
			t.Errorf("%s (target %q, ready %v before) had waited %v past MaxWait %v when %s (target %q), written after it, started",
				u.name, u.target, v.wrote.Sub(u.ready), v.start.Sub(u.ready)-c.maxWait, c.maxWait, v.name, v.target)
		}
	}
}

// crosses reports whether a break came between from and to.
func crosses(breaks []time.Time, from, to time.Time) bool {
	for _, b := range breaks {
		if !b.Before(from) && !b.After(to) {
			return true
		}
	}
	return false
}

// cappedWithin reports whether target had cap operations running at some
// moment between from and to. Called with rec.mu held.
func (rec *opRecord) cappedWithin(target string, from, to time.Time, cap int) bool {
	for _, op := range rec.ops {
		if op.target != target || op.from.After(to) || !op.to.IsZero() && op.to.Before(from) {
			continue
		}
		// op runs somewhere in [from, to]: count the others running at
		// its start, or at from if it began before.
		at := op.from
		if at.Before(from) {
			at = from
		}
		n := 0
		for _, o := range rec.ops {
			if o.target == target && !o.from.After(at) && (o.to.IsZero() || o.to.After(at)) {
				n++
			}
		}
		if n >= cap {
			return true
		}
	}
	return false
}

// checkExplain asks Explain about key, with every goroutine of the bubble
// blocked, and checks the answer against the model at that moment: a key
// Explain calls Done holds its latest value in the table, Done, and in the
// target; Absent is not in the table, and, deleted here, not in the
// target; Unread is in the table at a revision the reconciler has not
// read; Running has its operation running in the target; Retrying has
// failed (or was deferred) and runs nothing.
func (run *configRun) checkExplain(key string) {
	t, m := run.t, run.m
	e, err := run.r.Explain(context.Background(), []byte(key))
	if err != nil {
		t.Fatalf("Explain(%s): %v", key, err)
	}
	obj := run.f.get(key)
	value, live := run.live[key]
	m.mu.Lock()
	defer m.mu.Unlock()
	bad := func(why string) {
		t.Errorf("Explain(%s) = %s\n  but %s (target holds %q, running %v)", key, e, why, m.state[key], m.running[key])
	}
	switch e.State {
	case reconciler.KeyDone:
		checkExplainDone(m, key, value, live, obj, bad)
	case reconciler.KeyAbsent:
		if live {
			bad("the table holds it")
		} else if _, in := m.state[key]; e.Deleted && in && !m.running[key] {
			bad("its Delete succeeded, yet the target holds it")
		}
	case reconciler.KeyUnread:
		if !live || e.Revision <= e.ReadTo {
			bad("it is not a change the reconciler has not read")
		}
	case reconciler.KeyRunning:
		if !m.running[key] {
			bad("no operation on it runs")
		}
	case reconciler.KeyRetrying:
		deferred := strings.Contains(e.Reason, "not ready yet") || strings.Contains(e.Reason, "written over")
		// After a restart, an Error the table kept is retried at once: the
		// attempt after the one that failed may have succeeded, its Done
		// write lost as the hive stopped (seed 759, one run in 500).
		kept := e.InTable && e.Status.Kind == reconciler.StatusKindError
		if m.failures[key] == 0 && !deferred && !kept {
			bad("it has not failed")
		}
	}
}

// checkExplainDone checks a Done answer: the table holds the key's
// latest value Done, and the target holds it (or an operation on it
// runs).
func checkExplainDone(m *modelTarget, key, value string, live bool, obj *testObject, bad func(string)) {
	switch {
	case !live || obj == nil || obj.Status.Kind != reconciler.StatusKindDone:
		bad("the table does not hold it Done")
	case m.state[key] != value && !m.running[key]:
		bad("the target does not hold its value " + value)
	}
}

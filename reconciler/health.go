package reconciler

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cilium/statedb"
)

// maxHealthErrors bounds the errors joined into the Degraded health report.
const maxHealthErrors = 10

// failure is why one object is failing and since when.
type failure struct {
	err   string
	since time.Time
}

// healthState tracks the failing objects and what was last reported.
type healthState struct {
	failing map[string]failure
	dirty   bool   // failing changed since the last report
	last    string // the last health message, to skip repeats
}

func newHealthState() healthState {
	return healthState{failing: map[string]failure{}, dirty: true}
}

func (h *healthState) setFailing(key, err string, now time.Time) {
	if f, ok := h.failing[key]; ok {
		if f.err == err {
			return
		}
		now = f.since
	}
	h.failing[key] = failure{err: err, since: now}
	h.dirty = true
}

func (h *healthState) clearFailing(key string) {
	if _, ok := h.failing[key]; ok {
		delete(h.failing, key)
		h.dirty = true
	}
}

// firstErrors returns the failures of the smallest keys, at most n, in key
// order: a stable report that costs O(failing) only when failing changed.
func (h *healthState) firstErrors(n int) []error {
	keys := make([]string, 0, n+1)
	for k := range h.failing {
		if len(keys) == n && k >= keys[n-1] {
			continue
		}
		i, _ := slices.BinarySearch(keys, k)
		keys = slices.Insert(keys, i, k)
		if len(keys) > n {
			keys = keys[:n]
		}
	}
	errs := make([]error, len(keys))
	for i, k := range keys {
		errs[i] = fmt.Errorf("%s: %s", printableKey(k), h.failing[k].err)
	}
	return errs
}

// printableKey shows a primary key: as text when it is printable, else
// in hex.
func printableKey(k string) string {
	for _, r := range k {
		if r < 0x20 || r > 0x7e {
			return fmt.Sprintf("%x", k)
		}
	}
	return k
}

// report publishes health, progress and gauges after a round.
func (l *loop[Obj]) report(now time.Time) {
	txn := l.roundTxn
	if txn == nil {
		txn = l.db.ReadTxn()
	}
	l.reportHealth(l.cfg.Table.NumObjects(txn))
	l.progress.set(l.watermarks())

	var oldest time.Duration
	for _, it := range l.busy {
		oldest = max(oldest, now.Sub(it.pickedAt))
	}
	l.metrics.Gauges(Gauges{
		Failing:       len(l.status.failing),
		Waiting:       len(l.busy),
		InFlight:      l.results.inFlight(),
		Retries:       l.retries.len(),
		OldestWaiting: oldest,
	})
}

func (l *loop[Obj]) reportHealth(objects int) {
	h := &l.status
	var msg string
	var err error
	switch {
	case len(h.failing) > 0 || l.full.lastErr != nil:
		if h.dirty || h.last == "" || !strings.HasPrefix(h.last, "Degraded") {
			errs := h.firstErrors(maxHealthErrors)
			if l.full.lastErr != nil {
				errs = append([]error{fmt.Errorf("prune: %w", l.full.lastErr)}, errs...)
			}
			if more := len(h.failing) - min(len(h.failing), maxHealthErrors); more > 0 {
				errs = append(errs, fmt.Errorf("and %d more", more))
			}
			err = errors.Join(errs...)
			msg = fmt.Sprintf("Degraded: %d object(s) failing", len(h.failing))
			if l.full.lastErr != nil {
				msg += ", prune failed"
			}
			h.dirty = false
			h.last = msg
			l.health.Degraded(msg[len("Degraded: "):], err)
		}
		return
	case l.suspended():
		msg = fmt.Sprintf("Suspended, %d object(s)", objects)
	default:
		msg = fmt.Sprintf("OK, %d object(s)", objects)
	}
	h.dirty = false
	if msg != h.last {
		h.last = msg
		l.health.OK(msg)
	}
}

// watermarks computes what WaitUntilReconciled reports: every change up to
// reconciled has been attempted; retryLow is the lowest revision of a change
// still waiting for a successful retry (reconciled+1 when none). It walks
// the busy items: work proportional to the round, not to the table.
func (l *loop[Obj]) watermarks() (reconciled, retryLow statedb.Revision) {
	reconciled = l.pulledTo
	retryLow = ^statedb.Revision(0)
	if low, ok := l.retries.lowWatermark(); ok {
		retryLow = low
	}
	for _, it := range l.busy {
		if it.failures == 0 {
			reconciled = min(reconciled, it.rev-1)
		} else {
			retryLow = min(retryLow, it.origRev)
		}
		if it.hasNext {
			reconciled = min(reconciled, it.next.rev-1)
		}
	}
	retryLow = min(retryLow, reconciled+1)
	return reconciled, retryLow
}

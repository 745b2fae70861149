package k8ssource

import (
	"fmt"
	"time"
)

// A Delete that keeps failing holds its object Terminating with the
// finalizer (CleanupFailed, and a Warning Event): the status job's health
// says so too, Degraded with how many objects a failing cleanup holds
// and the oldest, and CleanupMetrics counts them, so that an operator
// sees a stuck finalizer without reading every object.

// CleanupMetrics, when the StatusMetrics of a writer implement it,
// receives the objects held by a failing cleanup after each change:
// how many, and when the oldest of them was deleted (zero when none).
// Prometheus' implement it.
type CleanupMetrics interface {
	StuckCleanups(n int, oldest time.Time)
}

// stuckCleanup records whether the object of key is held by a failing
// cleanup now: being deleted with the finalizer while a Delete fails.
func (w *statusWriter[T, Obj]) stuckCleanup(key string, ks *keyState) {
	var since time.Time
	if item, ok := w.tracker.snapshot(key); ok && ks.cleanupErr != "" && w.cleaningUp(&item) {
		since = time.Now()
		if dt := item.obj.GetDeletionTimestamp(); dt != nil {
			since = dt.Time
		}
	}
	if since.Equal(ks.stuckSince) {
		return
	}
	if ks.stuckSince.IsZero() {
		ks.stuckSeen = time.Now() // orders deletions of one second
	}
	ks.stuckSince = since
	w.reportStuck()
}

// forgetStuck drops a forgotten key from the count.
func (w *statusWriter[T, Obj]) forgetStuck(ks *keyState) {
	if !ks.stuckSince.IsZero() {
		ks.stuckSince = time.Time{}
		w.reportStuck()
	}
}

// reportStuck counts the objects held by a failing cleanup, for the
// metrics and health.
func (w *statusWriter[T, Obj]) reportStuck() {
	n, oldestKey := 0, ""
	var first *keyState
	for k, ks := range w.keys {
		if ks.stuckSince.IsZero() {
			continue
		}
		n++
		if first == nil || ks.stuckSince.Before(first.stuckSince) ||
			(ks.stuckSince.Equal(first.stuckSince) && ks.stuckSeen.Before(first.stuckSeen)) {
			first, oldestKey = ks, k
		}
	}
	var oldest time.Time
	if first != nil {
		oldest = first.stuckSince
	}
	w.stuck = stuckStats{n: n, oldest: oldest, oldestKey: oldestKey}
	if m, ok := w.metrics.(CleanupMetrics); ok {
		m.StuckCleanups(n, oldest)
	}
	w.reportHealth()
}

// stuckStats are the objects held by a failing cleanup.
type stuckStats struct {
	n         int
	oldest    time.Time
	oldestKey string
}

// err is the health error of the stuck cleanups, nil when none.
func (s stuckStats) err(w interface{ cleanupErrOf(string) string }) error {
	if s.n == 0 {
		return nil
	}
	return fmt.Errorf("%d object(s) held by a failing cleanup (finalizer); the oldest, %s, deleted %s ago: %s",
		s.n, s.oldestKey, time.Since(s.oldest).Round(time.Second), w.cleanupErrOf(s.oldestKey))
}

func (w *statusWriter[T, Obj]) cleanupErrOf(key string) string {
	if ks := w.keys[key]; ks != nil {
		return ks.cleanupErr
	}
	return ""
}

package reconciler_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// A user's tests run converge inside a testing/synctest bubble, as
// statedb's own reconciler tests do. Every timer the engine arms must be
// on the bubble's clock: a goroutine blocked on anything else (a file
// descriptor, a kernel timer) is not durably blocked, so the bubble's
// clock would never advance and the test would hang. These run with the
// defaults users get, the round limiter included, whose waits are under
// a millisecond.

// TestBubbleRoundLimiterAndRetries: a burst paced by the default round
// limiter, and a key that fails twice and is retried with backoff, all
// settle on the bubble's clock.
func TestBubbleRoundLimiterAndRetries(t *testing.T) {
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RoundRateLimiter = nil // the default: 1,000 rounds a second, burst 1
			cfg.RoundSize = 10         // many rounds, each waiting on the limiter
			cfg.RetryBackoffMin, cfg.RetryBackoffMax = 10*time.Millisecond, time.Second
		},
		func(f *fixture, ops *timedOps) {
			f.target("").SetFault("bad", fake.Fault{Mode: fake.ModeError, Count: 2})
			for i := range 100 {
				insert(t, f, &testObject{ID: fmt.Sprint(i), Value: "v", Status: reconciler.StatusPending()})
			}
			insert(t, f, &testObject{ID: "bad", Value: "v", Status: reconciler.StatusPending()})
			r, _ := f.reconciler("")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // bubble time
			defer cancel()
			if err := r.WaitUntilSettled(ctx, f.table.Revision(f.db.ReadTxn())); err != nil {
				t.Fatalf("WaitUntilSettled: %v (%+v)", err, r.Status().Objects)
			}
			if err := reconciler.WaitForReconciliation(ctx, f.db, f.table, statusIndex); err != nil {
				t.Fatal(err)
			}
			if got := len(f.target("").State()); got != 101 {
				t.Errorf("target holds %d objects, want 101", got)
			}
			// 101 objects in rounds of at most 10, each after the
			// limiter's 1ms: at least 10ms of bubble time passed.
			if at := ops.attempts(); len(at) != 103 || at[len(at)-1] < 10*time.Millisecond {
				t.Errorf("%d attempts, the last at %v: want 103 (two retries), paced by the round limiter", len(at), at[len(at)-1])
			}
		})
}

// TestBubbleSyncDebounceAndRetries: a whole-set reconciler's trailing
// debounce and the retry of a failed Sync run on the bubble's clock.
func TestBubbleSyncDebounceAndRetries(t *testing.T) {
	inSyncBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.SyncDebounce = reconciler.Debounce{Quiet: 50 * time.Millisecond, MaxWait: time.Second}
			cfg.RetryBackoffMin, cfg.RetryBackoffMax = 100*time.Millisecond, time.Second
		},
		func(f *fixture, ops *timedSync) {
			f.markInit()
			synctest.Wait()
			f.target("").SetFault("sync", fake.Fault{Mode: fake.ModeError, Count: 1})
			start := time.Now()
			insert(t, f, pendingObject("1", "one"))
			time.Sleep(10 * time.Millisecond)
			insert(t, f, pendingObject("2", "two"))
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := reconciler.WaitForReconciliation(ctx, f.db, f.table, statusIndex); err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(f.target("").State()); got != "map[1:one 2:two]" {
				t.Errorf("target %s, want map[1:one 2:two]", got)
			}
			// The first Sync after the quiet period that followed the
			// second change fails; its retry comes after the backoff.
			if took := time.Since(start); took < 60*time.Millisecond+50*time.Millisecond {
				t.Errorf("settled %v after the first change: before the quiet period and the retry's backoff", took)
			}
		})
}

// TestBubbleRefreshOwnSchedule: refresh runs on a timer of its own, with
// pruning off. An object written Done long ago (restored, preloaded) is
// refreshed as soon as it is read, even after the walk went idle on an
// empty table; a Done one is refreshed RefreshInterval after its write,
// not before.
func TestBubbleRefreshOwnSchedule(t *testing.T) {
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RefreshInterval = time.Hour
			cfg.FullReconciliationInterval = reconciler.Off
		},
		func(f *fixture, ops *timedOps) {
			synctest.Wait() // the walk has looked at the empty table
			old := reconciler.Status{Kind: reconciler.StatusKindDone, UpdatedAt: time.Now().Add(-2 * time.Hour)}
			insert(t, f, &testObject{ID: "old", Value: "v", Status: old})
			synctest.Wait()
			if got := fmt.Sprint(f.target("").History()); got != "[update-refresh(old)]" {
				t.Fatalf("history %s, want the old object refreshed at once", got)
			}
			insert(t, f, &testObject{ID: "new", Value: "v", Status: reconciler.StatusPending()})
			synctest.Wait()
			start := time.Now()
			time.Sleep(time.Hour - time.Second)
			synctest.Wait()
			if n := len(f.target("").History()); n != 2 {
				t.Fatalf("%d operations before an hour passed, want 2: %v", n, f.target("").History())
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			h := f.target("").History()
			if len(h) != 4 || !slices.Contains(h[2:], "update-refresh(new)") || !slices.Contains(h[2:], "update-refresh(old)") {
				t.Fatalf("history %v after %v, want both refreshed once an hour passed", h, time.Since(start))
			}
		})
}

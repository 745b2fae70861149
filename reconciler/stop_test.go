package reconciler_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// lockedBuffer is a log sink safe for the engine's goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestStopGivesUpOnOperation: an operation that ignores its context does
// not hold up Stop. The reconciler, made before the hive starts (as a
// cell.Invoke makes it), gives up on it a little before the stop
// deadline, or with OperationTimeout that long plus 100ms after the stop
// began, whichever comes first; Stop returns without an error; the log
// names the operation; nothing is written afterwards; the operation's
// goroutine ends when it returns. Times are the bubble's: exact.
func TestStopGivesUpOnOperation(t *testing.T) {
	for _, tc := range []struct {
		name      string
		timeout   time.Duration // OperationTimeout
		stopIn    time.Duration // the stop context's deadline
		whole     bool
		want      time.Duration // when Stop returns
		wantInLog string
	}{
		{"no timeout, deadline 10s", 0, 10 * time.Second, false, 9 * time.Second, `update of \"stuck\"`},
		{"no timeout, deadline 300ms", 0, 300 * time.Millisecond, false, 270 * time.Millisecond, `update of \"stuck\"`},
		{"timeout 1s, deadline 1m", time.Second, time.Minute, false, time.Second + 100*time.Millisecond, `update of \"stuck\"`},
		{"timeout 1m, deadline 10s", time.Minute, 10 * time.Second, false, 9 * time.Second, `update of \"stuck\"`},
		{"whole set, timeout 1s", time.Second, time.Minute, true, time.Second + 100*time.Millisecond, "Sync, running for"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var logs lockedBuffer
				log := slog.New(slog.NewTextHandler(&logs, nil))
				f := newFixture(t)
				if err := f.hive.Populate(log); err != nil {
					t.Fatal(err)
				}
				target := f.target("")
				target.SetFault("stuck", fake.Fault{Mode: fake.ModeStuck})
				target.SetFault("sync", fake.Fault{Mode: fake.ModeStuck})
				cfg := testConfig(f, &testOps{target: target, getStatus: func(o *testObject) reconciler.Status { return o.Status }},
					reconciler.Config[*testObject]{OperationTimeout: tc.timeout, RoundRateLimiter: rate.NewLimiter(rate.Inf, 1),
						FullReconciliationInterval: reconciler.Off, RefreshInterval: reconciler.Off})
				if tc.whole {
					cfg.Operations, cfg.SyncOperations = nil, &testSyncOps{target: target}
					cfg.RoundRateLimiter, cfg.RefreshRateLimiter, cfg.RefreshInterval = nil, nil, 0
				}
				if _, err := reconciler.New(cfg, f.params); err != nil {
					t.Fatal(err)
				}
				if err := f.hive.Start(log, context.Background()); err != nil {
					t.Fatal(err)
				}
				f.markInit()
				insert(t, f, pendingObject("stuck", "v"))
				synctest.Wait() // its operation runs, and ignores its context
				before := f.table.Revision(f.db.ReadTxn())

				ctx, cancel := context.WithTimeout(context.Background(), tc.stopIn)
				defer cancel()
				start := time.Now()
				if err := f.hive.Stop(log, ctx); err != nil {
					t.Errorf("Stop: %v, want it to give up on the operation and return", err)
				}
				if took := time.Since(start); took != tc.want {
					t.Errorf("Stop returned after %v, want %v", took, tc.want)
				}
				if !strings.Contains(logs.String(), "Stopped without waiting for an operation that ignores its context") ||
					!strings.Contains(logs.String(), tc.wantInLog) {
					t.Errorf("the log does not name the operation given up on:\n%s", logs.String())
				}
				target.Heal("stuck")
				target.Heal("sync")
				synctest.Wait() // the operation returns; its goroutine ends with the bubble
				if rev := f.table.Revision(f.db.ReadTxn()); rev != before {
					t.Errorf("the table changed after Stop: revision %d, was %d", rev, before)
				}
			})
		})
	}
}

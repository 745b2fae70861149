package reconciler_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cilium/statedb"
	"golang.org/x/time/rate"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// timedOps records when each Update starts, in the bubble's fake time.
type timedOps struct {
	testOps
	mu    sync.Mutex
	start time.Time
	at    []time.Duration
}

func (o *timedOps) Update(ctx context.Context, txn statedb.ReadTxn, rev statedb.Revision, obj *testObject) error {
	o.mu.Lock()
	o.at = append(o.at, time.Since(o.start))
	o.mu.Unlock()
	return o.testOps.Update(ctx, txn, rev, obj)
}

func (o *timedOps) attempts() []time.Duration {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.at)
}

// inBubble runs fn with a started fixture and a reconciler over timedOps
// (f.reconciler(cfg.Name) returns it), inside a synctest bubble: time only passes when everything is blocked, so
// delays are checked exactly and the test takes no wall-clock time.
func inBubble(t *testing.T, modify func(*reconciler.Config[*testObject]), fn func(f *fixture, ops *timedOps)) {
	inBubbleWith(t, func(_ *fixture, cfg *reconciler.Config[*testObject]) { modify(cfg) }, fn)
}

// inBubbleWith is inBubble with a modify that sees the started fixture
// (its database: another table a Config names).
func inBubbleWith(t *testing.T, modify func(*fixture, *reconciler.Config[*testObject]), fn func(f *fixture, ops *timedOps)) {
	synctest.Test(t, func(t *testing.T) {
		f := startedFixture(t)
		ops := &timedOps{
			testOps: testOps{target: f.target(""), getStatus: func(o *testObject) reconciler.Status { return o.Status }},
			start:   time.Now(),
		}
		cfg := testConfig(f, ops, reconciler.Config[*testObject]{
			RoundRateLimiter:           rate.NewLimiter(rate.Inf, 1),
			FullReconciliationInterval: reconciler.Off,
			RefreshInterval:            reconciler.Off,
		})
		modify(f, &cfg)
		r, err := reconciler.New(cfg, f.params)
		if err != nil {
			t.Fatal(err)
		}
		f.reconcilers[cfg.Name] = r
		f.markInit()
		fn(f, ops)
	})
}

func insert(t *testing.T, f *fixture, objs ...*testObject) {
	t.Helper()
	wtxn := f.db.WriteTxn(f.table)
	for _, o := range objs {
		if _, _, err := f.table.Insert(wtxn, o); err != nil {
			t.Fatal(err)
		}
	}
	wtxn.Commit()
}

func TestRetryAfterDelay(t *testing.T) {
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RetryBackoffMin, cfg.RetryBackoffMax = 10*time.Millisecond, 20*time.Millisecond
		},
		func(f *fixture, ops *timedOps) {
			// Busy for 5s, twice: retried after 5s each time, not after
			// the 10ms backoff; then a plain failure goes back to the
			// backoff sequence.
			f.target("").SetFault("1", fake.Fault{Mode: fake.ModeRetryAt, After: 5 * time.Second, Count: 2})
			insert(t, f, &testObject{ID: "1", Value: "one", Status: reconciler.StatusPending()})
			synctest.Wait()
			time.Sleep(4999 * time.Millisecond)
			synctest.Wait()
			if n := len(ops.attempts()); n != 1 {
				t.Fatalf("%d attempts before the RetryAfter delay passed, want 1", n)
			}
			time.Sleep(5 * time.Second)
			synctest.Wait()
			f.target("").SetFault("1", fake.Fault{Mode: fake.ModeError, Count: 1})
			time.Sleep(time.Second)
			synctest.Wait()

			at := ops.attempts()
			if len(at) != 4 {
				t.Fatalf("attempts at %v, want 4", at)
			}
			for i, want := range []time.Duration{5 * time.Second, 5 * time.Second} {
				if gap := at[i+1] - at[i]; gap != want {
					t.Errorf("gap %d is %s, want exactly %s", i, gap, want)
				}
			}
			// The plain failure after the RetryAfter ones waits the
			// backoff of its failure count (the third): capped at 20ms,
			// with equal jitter, so 10ms to 20ms.
			if gap := at[3] - at[2]; gap < 10*time.Millisecond || gap > 20*time.Millisecond {
				t.Errorf("backoff after RetryAfter is %s, want 10ms..20ms", gap)
			}
			if got := f.target("").State()["1"]; got != "one" {
				t.Errorf("target has %q, want one", got)
			}
		})
}

func TestDeferralStaysPending(t *testing.T) {
	inBubble(t,
		func(*reconciler.Config[*testObject]) {},
		func(f *fixture, ops *timedOps) {
			f.target("").SetFault("1", fake.Fault{Mode: fake.ModeDefer, After: 3 * time.Second, Count: 1})
			insert(t, f, &testObject{ID: "1", Value: "one", Status: reconciler.StatusPending()})
			synctest.Wait()
			obj, _, _ := f.table.Get(f.db.ReadTxn(), idIndex.Query("1"))
			if obj.Status.Kind != reconciler.StatusKindPending {
				t.Fatalf("deferred object is %s, want Pending", obj.Status.Kind)
			}
			time.Sleep(3 * time.Second)
			synctest.Wait()
			at := ops.attempts()
			if len(at) != 2 || at[1]-at[0] != 3*time.Second {
				t.Fatalf("attempts at %v, want two, 3s apart", at)
			}
			obj, _, _ = f.table.Get(f.db.ReadTxn(), idIndex.Query("1"))
			if obj.Status.Kind != reconciler.StatusKindDone {
				t.Fatalf("object is %s after the deferral, want Done", obj.Status.Kind)
			}
		})
}

func TestBackoffSequence(t *testing.T) {
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RetryBackoffMin, cfg.RetryBackoffMax = time.Second, 8*time.Second
		},
		func(f *fixture, ops *timedOps) {
			f.target("").SetFault("1", fake.Fault{Mode: fake.ModeError})
			insert(t, f, &testObject{ID: "1", Value: "one", Status: reconciler.StatusPending()})
			time.Sleep(time.Minute)
			synctest.Wait()
			f.target("").Heal("")
			at := ops.attempts()
			if len(at) < 8 {
				t.Fatalf("only %d attempts in a minute: %v", len(at), at)
			}
			// Equal jitter: the n-th retry waits between half and all of
			// min(1s * 2^(n-1), 8s).
			nominal := time.Second
			var gaps []string
			for i := 1; i < len(at); i++ {
				gap := at[i] - at[i-1]
				gaps = append(gaps, gap.String())
				if gap < nominal/2 || gap > nominal {
					t.Errorf("retry %d waited %s, want %s..%s", i, gap, nominal/2, nominal)
				}
				nominal = min(2*nominal, 8*time.Second)
			}
			t.Logf("gaps: %s", strings.Join(gaps, " "))
		})
}

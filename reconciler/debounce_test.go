package reconciler_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/time/rate"

	"github.com/converge-go/converge/reconciler"
)

// roundRecorder records the rounds a reconciler commits.
type roundRecorder struct {
	reconciler.NopMetrics
	mu     sync.Mutex
	start  time.Time
	rounds []string // "objects@time"
}

func (m *roundRecorder) Reconciler(reconciler.ReconcilerID) reconciler.ReconcilerMetrics { return m }

func (m *roundRecorder) Round(objects int, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rounds = append(m.rounds, strconv.Itoa(objects)+"@"+time.Since(m.start).String())
}

// TestDebounce shows the debounce recipe: RoundRateLimiter with
// rate.Every(interval) and burst 1 reconciles the first change at once
// (leading edge), then holds later changes for at most one round per
// interval (the refractory period), so a burst is folded into one round.
func TestDebounce(t *testing.T) {
	rec := &roundRecorder{}
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RoundRateLimiter = rate.NewLimiter(rate.Every(100*time.Millisecond), 1)
			cfg.Metrics = rec
		},
		func(f *fixture, ops *timedOps) {
			// A quiet period first, so the limiter's token is there.
			time.Sleep(time.Second)
			synctest.Wait()
			rec.start = time.Now()
			insert(t, f, &testObject{ID: "first", Status: reconciler.StatusPending()})
			synctest.Wait()

			// A burst of 100 single-object transactions, 1ms apart.
			for i := range 100 {
				time.Sleep(time.Millisecond)
				insert(t, f, &testObject{ID: strconv.Itoa(i), Status: reconciler.StatusPending()})
			}
			time.Sleep(time.Second)
			synctest.Wait()

			rec.mu.Lock()
			defer rec.mu.Unlock()
			// The first change at once; the burst (changes at 1ms to
			// 100ms) in the round the limiter allows at 100ms. The change
			// made at the very instant of that round lands in it or, if
			// the round ran first, alone in the next one at 200ms.
			ok := len(rec.rounds) == 2 && rec.rounds[0] == "1@0s" && rec.rounds[1] == "100@100ms" ||
				len(rec.rounds) == 3 && rec.rounds[0] == "1@0s" && rec.rounds[1] == "99@100ms" && rec.rounds[2] == "1@200ms"
			if !ok {
				t.Fatalf("rounds %v, want [1@0s 100@100ms] or [1@0s 99@100ms 1@200ms]", rec.rounds)
			}
			if n := len(ops.attempts()); n != 101 {
				t.Fatalf("%d updates, want 101", n)
			}
		})
}

// TestOwnWritesSpendNoRound checks that the round limiter paces only rounds
// with work. Every round's status writes come back through the change
// iterator; if reading them took the limiter's token, a user's change made
// one interval later would wait for another interval.
func TestOwnWritesSpendNoRound(t *testing.T) {
	const interval = 100 * time.Millisecond
	rec := &roundRecorder{}
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RoundRateLimiter = rate.NewLimiter(rate.Every(interval), 1)
			cfg.Metrics = rec
		},
		func(f *fixture, ops *timedOps) {
			time.Sleep(time.Second)
			synctest.Wait()
			rec.start = time.Now()

			// A change every 1.5 intervals: each finds the limiter's token
			// there, however the loop read the Done writes of the last.
			for i := range 5 {
				insert(t, f, &testObject{ID: strconv.Itoa(i), Status: reconciler.StatusPending()})
				time.Sleep(interval * 3 / 2)
			}
			// Two changes within one interval: the second waits for it.
			insert(t, f, &testObject{ID: "a", Status: reconciler.StatusPending()})
			time.Sleep(interval / 10)
			insert(t, f, &testObject{ID: "b", Status: reconciler.StatusPending()})
			time.Sleep(time.Second)
			synctest.Wait()

			rec.mu.Lock()
			defer rec.mu.Unlock()
			want := []string{"1@0s", "1@150ms", "1@300ms", "1@450ms", "1@600ms", "1@750ms", "1@850ms"}
			if !slices.Equal(rec.rounds, want) {
				t.Fatalf("rounds %v, want %v", rec.rounds, want)
			}
		})
}

// TestRoundLimiterPacesWorkNotEchoes: the round limiter paces the rounds
// that pick up work, not the read of the reconciler's own status writes:
// a lone change's write is read back at once (no wake-up of its own at
// the limiter's next token), while a change made right after it waits
// for the token.
func TestRoundLimiterPacesWorkNotEchoes(t *testing.T) {
	inBubble(t,
		func(cfg *reconciler.Config[*testObject]) {
			cfg.RoundRateLimiter = rate.NewLimiter(rate.Every(time.Second), 1)
		},
		func(f *fixture, ops *timedOps) {
			r, _ := f.reconciler("")
			explain := func(key string) reconciler.Explanation {
				t.Helper()
				e, err := r.Explain(context.Background(), []byte(key))
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			insert(t, f, pendingObject("a", "1"))
			synctest.Wait()
			if e, rev := explain("a"), f.table.Revision(f.db.ReadTxn()); e.State != reconciler.KeyDone || e.ReadTo != rev {
				t.Fatalf("after a lone change: %s, read to %d of %d: want Done, its own status write read back", e.State, e.ReadTo, rev)
			}
			insert(t, f, pendingObject("b", "1"))
			synctest.Wait()
			if e := explain("b"); e.State != reconciler.KeyUnread {
				t.Fatalf("a change right after a round is %s: want Unread until the limiter's next token", e.State)
			}
			time.Sleep(time.Second)
			synctest.Wait()
			if at := ops.attempts(); len(at) != 2 || at[1] < time.Second {
				t.Fatalf("attempts at %v: want two, the second a second after the first round", at)
			}
		})
}

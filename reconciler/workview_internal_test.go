package reconciler

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/statedb"
)

// viewByWalk is view as it was before activeMark: read from the requests
// themselves. The marks must give the same answer.
func viewByWalk(w *work[int], readTo statedb.Revision, now time.Time) workView[int] {
	v := workView[int]{reconciled: readTo, retryLow: ^statedb.Revision(0), oldestPicked: now}
	for _, r := range w.active {
		if !r.tried {
			v.reconciled = min(v.reconciled, r.askedAt-1)
		}
		if v.oldest == nil || r.askedAt < v.oldest.askedAt {
			v.oldest = r
		}
		if r.pickedAt.Before(v.oldestPicked) {
			v.oldestPicked = r.pickedAt
		}
	}
	if items := w.byAsk.items; len(items) > 0 && (v.oldest == nil || items[0].askedAt < v.oldest.askedAt) {
		v.oldest = items[0]
	}
	if v.oldest != nil {
		v.retryLow = v.oldest.askedAt
	}
	v.retryLow = min(v.retryLow, v.reconciled+1)
	return v
}

// checkMarks fails unless every active request's mark mirrors it.
func checkMarks(t *testing.T, w *work[int], step int) {
	t.Helper()
	if len(w.marks) != len(w.active) {
		t.Fatalf("step %d: %d marks for %d active requests", step, len(w.marks), len(w.active))
	}
	for i, r := range w.active {
		want := activeMark{askedAt: r.askedAt, pickedAt: r.pickedAt, tried: r.tried}
		if r.activeIdx != i || w.marks[i] != want {
			t.Fatalf("step %d: active[%d] (%s, index %d) has mark %+v, want %+v", step, i, r.key, r.activeIdx, w.marks[i], want)
		}
	}
}

// TestActiveMarksFollowTheWork drives the outstanding work through random
// transitions of both executors (changes, dispatch, results, retries,
// Syncs taken and untaken, settling) and checks after each that the
// marks a report reads mirror the active requests, and that the view
// read from them is the one the requests themselves give.
func TestActiveMarksFollowTheWork(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		w := newWork[int](seed%2 == 0)
		now := time.Unix(1000, 0)
		var rev statedb.Revision
		var running []*request[int]
		for step := range 400 {
			now = now.Add(time.Duration(rng.IntN(5)) * time.Millisecond)
			key := "k" + strconv.Itoa(rng.IntN(12))
			switch op := rng.IntN(9); {
			case op <= 1: // a change
				rev++
				w.add(key, change[int]{obj: int(rev), rev: rev, deleted: op == 1 && rng.IntN(4) == 0},
					Status{Kind: StatusKindPending, ID: uint64(rev)}, rev-statedb.Revision(rng.IntN(2)), now)
			case op == 2: // dispatch
				running = w.takeReady(running[:0])
			case op == 3: // a Sync takes everything
				running, _ = w.takeAll(running[:0], now)
			case op == 4 && len(running) > 0: // a result: failed, retried later
				r := running[rng.IntN(len(running))]
				if r.state == stRunning {
					w.setTried(r)
					w.retry(r, now.Add(time.Millisecond), false, "boom", now)
				}
			case op == 5 && len(running) > 0: // a result: settled
				r := running[rng.IntN(len(running))]
				if r.state == stRunning {
					w.setTried(r)
					r.running = 0
					w.settle(r)
				}
			case op == 6: // due retries come back
				for {
					r, ok := w.popDue(now)
					if !ok {
						break
					}
					w.requeue(r, now)
				}
			case op == 7 && len(running) > 0: // a Sync that did not run
				w.untake(running[rng.IntN(len(running))])
			case op == 8 && len(running) > 0: // a result in, its write still out
				if r := running[rng.IntN(len(running))]; r.state == stRunning {
					w.setTried(r)
				}
			}
			checkMarks(t, w, step)
			readTo := rev
			got, want := w.view(readTo, now), viewByWalk(w, readTo, now)
			if got.reconciled != want.reconciled || got.retryLow != want.retryLow ||
				!got.oldestPicked.Equal(want.oldestPicked) ||
				(got.oldest == nil) != (want.oldest == nil) ||
				(got.oldest != nil && got.oldest.askedAt != want.oldest.askedAt) {
				t.Fatalf("seed %d step %d: view %+v, by walking the requests %+v", seed, step, got, want)
			}
		}
	}
}

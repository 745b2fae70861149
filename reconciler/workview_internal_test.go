package reconciler

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/cilium/statedb"
)

// viewByWalk is view as it was before activeMark: the active requests
// read from the requests themselves. The marks must give the same answer.
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
	w.finishView(&v)
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

// workDriver drives a work through random transitions of both
// executors: changes, dispatch, results, retries, Syncs taken and
// untaken, settling.
type workDriver struct {
	rng     *rand.Rand
	w       *work[int]
	now     time.Time
	rev     statedb.Revision
	running []*request[int]
}

// step makes one random transition.
func (d *workDriver) step() {
	w := d.w
	d.now = d.now.Add(time.Duration(d.rng.IntN(5)) * time.Millisecond)
	var r *request[int]
	if len(d.running) > 0 {
		r = d.running[d.rng.IntN(len(d.running))]
	}
	switch op := d.rng.IntN(9); {
	case op <= 1: // a change
		d.rev++
		key := "k" + strconv.Itoa(d.rng.IntN(12))
		w.add(key, change[int]{obj: int(d.rev), rev: d.rev, deleted: op == 1 && d.rng.IntN(4) == 0},
			Status{Kind: StatusKindPending, ID: uint64(d.rev)}, d.rev-statedb.Revision(d.rng.IntN(2)), d.now)
	case op == 2: // dispatch
		d.running = w.takeReady(d.running[:0])
	case op == 3: // a Sync takes everything
		d.running, _ = w.takeAll(d.running[:0], d.now)
	case op == 6: // due retries come back
		for r, ok := w.popDue(d.now); ok; r, ok = w.popDue(d.now) {
			w.requeue(r, d.now)
		}
	case r == nil || (op != 7 && r.state != stRunning):
	case op == 4: // a result: failed, retried later
		w.setTried(r)
		w.retry(r, d.now.Add(time.Millisecond), false, "boom", d.now)
	case op == 5: // a result: settled
		w.setTried(r)
		r.running = 0
		w.settle(r)
	case op == 7: // a Sync that did not run
		w.untake(r)
	case op == 8: // a result in, its write still out
		w.setTried(r)
	}
}

// TestActiveMarksFollowTheWork drives the outstanding work through random
// transitions and checks after each that the marks a report reads mirror
// the active requests, and that the view read from them is the one the
// requests themselves give.
func TestActiveMarksFollowTheWork(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		d := &workDriver{rng: rand.New(rand.NewPCG(seed, 0)), w: newWork[int](seed%2 == 0), now: time.Unix(1000, 0)}
		for step := range 400 {
			d.step()
			checkMarks(t, d.w, step)
			got, want := d.w.view(d.rev, d.now), viewByWalk(d.w, d.rev, d.now)
			if got.reconciled != want.reconciled || got.retryLow != want.retryLow ||
				!got.oldestPicked.Equal(want.oldestPicked) ||
				(got.oldest == nil) != (want.oldest == nil) ||
				(got.oldest != nil && got.oldest.askedAt != want.oldest.askedAt) {
				t.Fatalf("seed %d step %d: view %+v, by walking the requests %+v", seed, step, got, want)
			}
		}
	}
}

package reconciler

import (
	"testing"
	"time"

	"github.com/cilium/statedb"
)

// TestCommittingRequest covers a request whose status write is out on the
// committer: it takes no room in a round, stays outstanding for the waits
// until landed, and a write that comes back after the request was replaced
// or settled is not its.
func TestCommittingRequest(t *testing.T) {
	now := time.Now()
	pending := Status{Kind: StatusKindPending, ID: 7}
	ch := func(rev statedb.Revision) change[int] { return change[int]{obj: 1, rev: rev} }

	// Queued, dispatched, its result judged and sent to the committer.
	start := func(t *testing.T) (*work[int], *request[int], uint64) {
		w := newWork[int](true)
		r := w.add("k", ch(10), pending, 10, now)
		taken := w.takeReady(nil)
		if len(taken) != 1 || taken[0] != r {
			t.Fatalf("takeReady = %v, want the request", taken)
		}
		id := r.attempt
		if !w.returned(r, id) {
			t.Fatal("the attempt's result is not wanted")
		}
		w.writeOut(r, id)
		return w, r, id
	}

	t.Run("landed", func(t *testing.T) { testCommittingLanded(t, start, now) })
	t.Run("replaced meanwhile", func(t *testing.T) {
		w, r, id := start(t)
		newer := w.add("k", ch(11), Status{Kind: StatusKindPending, ID: 8}, 11, now)
		if newer != r {
			t.Fatal("the key's record was not reused") // the case that makes the id matter
		}
		if w.committing != 0 {
			t.Fatalf("committing %d after the request was replaced, want 0", w.committing)
		}
		if w.writeBack(r, id) {
			t.Fatal("writeBack: a write that came back after its request was replaced was taken as the new request's")
		}
		if r.state != stQueued {
			t.Fatalf("the newer request is in state %d, want queued", r.state)
		}
	})

	t.Run("settled meanwhile", func(t *testing.T) {
		w, r, id := start(t)
		w.settle(r) // e.g. disowned
		if w.writeBack(r, id) {
			t.Fatal("writeBack: a write that came back after its request settled was taken")
		}
		// The record is reused for another key, and written out again
		// under a newer attempt: the old id still is not its.
		r2 := w.add("other", ch(12), pending, 12, now)
		w.takeReady(nil)
		id2 := r2.attempt
		w.returned(r2, id2)
		w.writeOut(r2, id2)
		if r2 == r && w.writeBack(r2, id) {
			t.Fatal("writeBack: an old attempt's write was taken by a reused record")
		}
		if !w.writeBack(r2, id2) {
			t.Fatal("writeBack: the newer attempt's write is its own")
		}
	})
}

func testCommittingLanded(t *testing.T, start func(*testing.T) (*work[int], *request[int], uint64), now time.Time) {
	w, r, id := start(t)
	if w.committing != 1 || len(w.active) != 1 {
		t.Fatalf("committing %d, active %d; want 1, 1", w.committing, len(w.active))
	}
	// Outstanding for the waits: not settled, the change not yet
	// counted as attempted.
	v := w.view(10, now)
	if v.retryLow != 10 || v.reconciled != 9 {
		t.Fatalf("view: reconciled %d, retry low %d; want 9, 10", v.reconciled, v.retryLow)
	}
	if w.kinds[StatusKindPending] != 1 {
		t.Fatalf("pending %d, want 1: the table holds Pending until the write lands", w.kinds[StatusKindPending])
	}
	if !w.writeBack(r, id) {
		t.Fatal("writeBack: the write is the request's own")
	}
	w.settle(r)
	if w.committing != 0 || len(w.active) != 0 || len(w.byKey) != 0 {
		t.Fatalf("after settling: committing %d, active %d, keys %d; want none", w.committing, len(w.active), len(w.byKey))
	}
}

// TestRevRangesBacklog checks that the loop recognizes its own writes read
// back a whole backlog later, however many commits came in between, and
// forgets them once read past.
func TestRevRangesBacklog(t *testing.T) {
	var rr revRanges
	for i := range 100 {
		from := statedb.Revision(1000*i + 501)
		rr.add(written{from: from, to: from + 499})
	}
	// Out of order: a committer's range learned after a later inline one.
	rr.add(written{from: 100_501, to: 100_600})
	rr.add(written{from: 100_101, to: 100_200})
	for i := range 100 {
		if rev := statedb.Revision(1000*i + 1); rr.has(rev) {
			t.Fatalf("has(%d): not written by us", rev)
		}
		if rev := statedb.Revision(1000*i + 600); !rr.has(rev) {
			t.Fatalf("has(%d): written by us %d commits before the last", rev, 100-i)
		}
	}
	if !rr.has(100_150) || rr.has(100_300) || !rr.has(100_550) {
		t.Fatal("the out-of-order range is not where it belongs")
	}
	rr.readPast(200_000)
	if len(rr.q)-rr.head != 0 {
		t.Fatalf("%d ranges kept after reading past them all", len(rr.q)-rr.head)
	}
}

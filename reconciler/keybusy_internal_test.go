package reconciler

import (
	"testing"
	"time"

	"github.com/cilium/statedb"
)

// checkKeyBusy recounts the queued requests whose key is busy.
func checkKeyBusy(t *testing.T, w *work[int], want int) {
	t.Helper()
	n := 0
	for _, r := range w.active {
		if r.state == stQueued && r.running != 0 {
			n++
		}
	}
	if n != w.keyBusy || n != want {
		t.Fatalf("keyBusy %d, recounted %d, want %d", w.keyBusy, n, want)
	}
}

// TestKeyBusyTakesNoRoom follows a key whose attempt runs past its
// timeout: the requests queued behind it, by a newer change or a due
// retry, are counted in keyBusy (no room in a round) until the attempt
// returns, however they leave the queue.
func TestKeyBusyTakesNoRoom(t *testing.T) {
	now := time.Now()
	ch := func(rev statedb.Revision) change[int] { return change[int]{obj: 1, rev: rev} }
	w := newWork[int](true)
	r := w.add("k", ch(1), Status{Kind: StatusKindPending, ID: 1}, 1, now)
	w.takeReady(nil)
	stuck := r.attempt
	if !w.overdue(r, stuck) {
		t.Fatal("the overdue attempt's result is not wanted")
	}
	w.retry(r, now, false, "timeout", now)
	checkKeyBusy(t, w, 0)

	w.requeue(r, now) // the retry came due; the attempt still runs
	checkKeyBusy(t, w, 1)
	if taken := w.takeReady(nil); len(taken) != 0 {
		t.Fatalf("took %d requests while the key is busy", len(taken))
	}

	w.add("k", ch(2), Status{Kind: StatusKindPending, ID: 2}, 2, now) // a newer change replaces it
	checkKeyBusy(t, w, 1)
	w.settle(r) // e.g. given away
	checkKeyBusy(t, w, 0)
	w.add("k", ch(3), Status{Kind: StatusKindPending, ID: 3}, 3, now) // gained again
	checkKeyBusy(t, w, 1)

	w.returned(r, stuck)
	checkKeyBusy(t, w, 0)
	if taken := w.takeReady(nil); len(taken) != 1 || taken[0].rev != 3 {
		t.Fatalf("took %v once the key is free, want the request of revision 3", taken)
	}
}

// TestUnownedKeepsKeysOnly: a key not owned is no request; its delete,
// the owner's work, leaves nothing behind; a key gained counts from the
// first change read while it was not owned.
func TestUnownedKeepsKeysOnly(t *testing.T) {
	now := time.Now()
	w := newWork[int](true)
	w.add("k", change[int]{obj: 1, rev: 5}, Status{Kind: StatusKindPending, ID: 1}, 5, now)
	w.lose("k", false, 5)
	if len(w.byKey) != 0 || len(w.active) != 0 || w.unowned["k"] != 5 {
		t.Fatalf("after losing k: %d requests, %d active, unowned %v", len(w.byKey), len(w.active), w.unowned)
	}
	w.lose("k", false, 9) // a later change read while not owned
	if at, ok := w.gained("k"); !ok || at != 5 {
		t.Fatalf("gained(k) = %d, %v; want 5, true", at, ok)
	}
	for i := range 1000 {
		key := string(rune('a'+i%26)) + string(rune(i))
		w.lose(key, false, statedb.Revision(i+1))
		w.lose(key, true, statedb.Revision(i+2))
	}
	if len(w.unowned) != 0 || len(w.byKey) != 0 {
		t.Fatalf("%d unowned keys and %d requests kept for keys deleted while not owned", len(w.unowned), len(w.byKey))
	}
}

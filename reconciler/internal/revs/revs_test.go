package revs

import "testing"

// TestRangesBacklog: a range is recognized a whole backlog later, however
// many others came in between, out-of-order ones included, and forgotten
// once read past.
func TestRangesBacklog(t *testing.T) {
	var rr Ranges
	for i := range 100 {
		from := uint64(1000*i + 501)
		rr.Add(Range{From: from, To: from + 499})
	}
	// Out of order: a range learned after a later one.
	rr.Add(Range{From: 100_501, To: 100_600})
	rr.Add(Range{From: 100_101, To: 100_200})
	for i := range 100 {
		if rev := uint64(1000*i + 1); rr.Has(rev) {
			t.Fatalf("Has(%d): not in a range", rev)
		}
		if rev := uint64(1000*i + 600); !rr.Has(rev) {
			t.Fatalf("Has(%d): in a range added %d ranges before the last", rev, 100-i)
		}
	}
	if !rr.Has(100_150) || rr.Has(100_300) || !rr.Has(100_550) {
		t.Fatal("the out-of-order range is not where it belongs")
	}
	rr.ReadPast(200_000)
	if rr.Len() != 0 {
		t.Fatalf("%d ranges kept after reading past them all", rr.Len())
	}
}

// TestSharedMoveTo: ranges collected elsewhere join the reader's.
func TestSharedMoveTo(t *testing.T) {
	var s Shared
	var rr Ranges
	s.Add(Range{From: 10, To: 20})
	s.Add(Range{From: 5, To: 1}) // empty: ignored
	s.MoveTo(&rr)
	if !rr.Has(15) || rr.Len() != 1 {
		t.Fatalf("after MoveTo: Has(15) %v, %d ranges", rr.Has(15), rr.Len())
	}
	s.MoveTo(&rr)
	if rr.Len() != 1 {
		t.Fatal("MoveTo handed the same ranges twice")
	}
}

// TestContainsDropsNothing: Contains answers for any revision, ahead of
// what was read too, and a later Has still finds every range.
func TestContainsDropsNothing(t *testing.T) {
	var rr Ranges
	for _, r := range []Range{{10, 12}, {20, 20}, {30, 35}} {
		rr.Add(r)
	}
	for rev, want := range map[uint64]bool{9: false, 10: true, 12: true, 13: false, 20: true, 33: true, 36: false} {
		if got := rr.Contains(rev); got != want {
			t.Errorf("Contains(%d) = %v, want %v", rev, got, want)
		}
	}
	if !rr.Has(11) || !rr.Has(20) || !rr.Has(35) {
		t.Fatal("Has lost a range after Contains")
	}
}

// TestCovers: a span is covered when every revision of it is in some
// range (adjacent ranges join up), not across a gap or a range read past.
func TestCovers(t *testing.T) {
	var rr Ranges
	rr.Add(Range{From: 3, To: 5})
	rr.Add(Range{From: 6, To: 6})
	rr.Add(Range{From: 9, To: 12})
	for _, c := range []struct {
		from, to uint64
		want     bool
	}{
		{3, 6, true},   // two adjacent ranges
		{4, 5, true},   // inside one
		{9, 12, true},  // exactly one
		{2, 5, false},  // starts before the first
		{3, 7, false},  // runs past a range into a gap
		{5, 10, false}, // a gap (7, 8) in the middle
		{13, 13, false},
		{7, 7, false},
		{6, 5, true}, // empty
	} {
		if got := rr.Covers(c.from, c.to); got != c.want {
			t.Errorf("Covers(%d, %d) = %v, want %v", c.from, c.to, got, c.want)
		}
	}
	rr.ReadPast(6)
	if rr.Covers(3, 5) {
		t.Error("Covers counts a range read past")
	}
	if !rr.Covers(10, 12) {
		t.Error("Covers(10, 12) false after reading past 6")
	}
}

// Package revs remembers ranges of statedb revisions until a reader has
// read past them: the reconciler's own status writes, so that the loop,
// reading the table's changes, recognizes their echoes without computing
// their keys.
package revs

import (
	"cmp"
	"slices"
	"sync"
)

// Range is the revisions From to To, both included; empty when To < From.
type Range struct{ From, To uint64 }

// Ranges remembers revision ranges until read past. Each object written in
// a write transaction gets a revision of its own, in one run no other
// writer interleaves with; a write's echo is read only after every change
// committed before it, a whole backlog later under load, so ranges are
// kept until read past, not for a fixed number of writes. Not safe for
// concurrent use.
type Ranges struct {
	q    []Range // by From
	head int     // q[:head] are read past
}

// Add records a range. Ranges come in revision order but for those
// learned late (Shared.MoveTo), which are put in place.
func (rr *Ranges) Add(r Range) {
	if r.To < r.From {
		return
	}
	rr.q = append(rr.q, r)
	for i := len(rr.q) - 1; i > rr.head && rr.q[i-1].From > rr.q[i].From; i-- {
		rr.q[i-1], rr.q[i] = rr.q[i], rr.q[i-1]
	}
}

// Has reports whether rev is in a range. The revisions asked about only
// grow (the change iterator reads in revision order), so the ranges below
// rev are dropped.
func (rr *Ranges) Has(rev uint64) bool {
	rr.ReadPast(rev - 1)
	return rr.head < len(rr.q) && rev >= rr.q[rr.head].From
}

// Contains reports whether rev is in a range, dropping none: for a look
// ahead of what has been read (Has drops what is below rev).
func (rr *Ranges) Contains(rev uint64) bool {
	q := rr.q[rr.head:]
	i, _ := slices.BinarySearchFunc(q, rev, func(r Range, rev uint64) int { return cmp.Compare(r.To, rev) })
	return i < len(q) && q[i].From <= rev
}

// Covers reports whether every revision from from to to (both
// included) is in a range, dropping none.
func (rr *Ranges) Covers(from, to uint64) bool {
	for _, r := range rr.q[rr.head:] {
		if r.To < from {
			continue
		}
		if r.From > from {
			return false
		}
		if from = r.To + 1; from > to {
			return true
		}
	}
	return from > to
}

// ReadPast drops the ranges at or below rev: every change up to rev has
// been read.
func (rr *Ranges) ReadPast(rev uint64) {
	for rr.head < len(rr.q) && rr.q[rr.head].To <= rev {
		rr.head++
	}
	switch {
	case rr.head == len(rr.q):
		rr.q, rr.head = rr.q[:0], 0
	case rr.head > 64 && rr.head > len(rr.q)/2:
		rr.q = append(rr.q[:0], rr.q[rr.head:]...)
		rr.head = 0
	}
}

// Len is how many ranges are kept.
func (rr *Ranges) Len() int { return len(rr.q) - rr.head }

// Shared collects ranges from another goroutine (the committer's), taken
// by the reader with MoveTo. Safe for concurrent use.
type Shared struct {
	mu     sync.Mutex
	ranges []Range
}

// Add records a range.
func (s *Shared) Add(r Range) {
	s.mu.Lock()
	s.ranges = append(s.ranges, r)
	s.mu.Unlock()
}

// MoveTo hands the ranges collected over to rr.
func (s *Shared) MoveTo(rr *Ranges) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.ranges {
		rr.Add(r)
	}
	s.ranges = s.ranges[:0]
}

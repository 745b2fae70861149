package reconciler

import (
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// StatusSet holds the statuses of several named reconcilers that share one
// object. Each reconciler's Config reads and writes its own entry:
//
//	GetObjectStatus: func(o *Obj) reconciler.Status { return o.Statuses.Get("routes") },
//	SetObjectStatus: func(o *Obj, s reconciler.Status) *Obj {
//		o.Statuses = o.Statuses.Set("routes", s)
//		return o
//	},
//
// and the user calls Pending when the object's data changes.
//
// A StatusSet is an immutable value: every method returns a new set and
// never writes to memory the receiver shares, so a set may be read from an
// object in a table while a clone of the object gets a modified copy. The
// zero value is an empty set with ID 0; NewStatusSet gives a fresh ID.
//
// In JSON and YAML a set is {"id": N, "statuses": {"name": Status, ...}}
// with "statuses" left out when empty. Decoding is strict (see
// UnmarshalJSON) and the creation time is not kept: a decoded set has a
// zero creation time.
type StatusSet struct {
	// id is the pending request every absent name belongs to.
	id uint64
	// createdAt stamps the Pending status that Get gives for absent names.
	createdAt time.Time
	// statuses is sorted by name, names unique. It is never written to
	// after the set is built: Set and Pending copy it.
	statuses []namedStatus
}

// namedStatus is one reconciler's entry in a StatusSet.
type namedStatus struct {
	name   string
	status Status
}

// NewStatusSet returns an empty set with a fresh ID, created now: every
// name is Pending until set.
func NewStatusSet() StatusSet {
	return StatusSet{id: newStatusID(), createdAt: time.Now()}
}

// Pending returns a copy of the set for an object whose data changed: a
// fresh ID, created now, and every name that the set holds made Pending
// with that ID (names are kept so String shows who still has to act).
//
// names adds reconcilers that must act on the object although the set
// does not hold them yet, as statedb's StatusSet.Pending(names...) does:
// a new object that two reconcilers serve is written with
// NewStatusSet().Pending("a", "b"), so that IsDone, String and anything
// reading the held statuses count both as outstanding before either has
// run. Repeated names are added once; the receiver and names are left
// unchanged. (Get reports an absent name as Pending either way.)
func (s StatusSet) Pending(names ...string) StatusSet {
	out := StatusSet{id: newStatusID(), createdAt: time.Now()}
	pending := Status{Kind: StatusKindPending, UpdatedAt: out.createdAt, ID: out.id}
	if len(s.statuses)+len(names) > 0 {
		out.statuses = make([]namedStatus, len(s.statuses), len(s.statuses)+len(names))
		for i, ns := range s.statuses {
			out.statuses[i] = namedStatus{name: ns.name, status: pending}
		}
	}
	for _, name := range names {
		if i, found := out.search(name); !found {
			out.statuses = slices.Insert(out.statuses, i, namedStatus{name: name, status: pending})
		}
	}
	return out
}

// Delete returns a copy of the set without name's entry, for a reconciler
// that no longer serves the object (statedb's StatusSet.Delete): IsDone
// and IsPendingOrRefreshing stop counting it, and a later Pending() makes
// it Pending again only if name is passed to it. Deleting a name the set
// does not hold returns the set unchanged. The receiver is left unchanged.
func (s StatusSet) Delete(name string) StatusSet {
	i, found := s.search(name)
	if !found {
		return s
	}
	out := make([]namedStatus, len(s.statuses)-1)
	copy(out, s.statuses[:i])
	copy(out[i:], s.statuses[i+1:])
	s.statuses = out
	return s
}

// IsPendingOrRefreshing reports whether a reconciler the set holds still
// has to act: one of its held statuses is Pending or Refreshing. Names
// the set does not hold are not counted (statedb's meaning), so an empty
// set reports false.
func (s *StatusSet) IsPendingOrRefreshing() bool {
	for _, ns := range s.statuses {
		if ns.status.Kind == StatusKindPending || ns.status.Kind == StatusKindRefreshing {
			return true
		}
	}
	return false
}

// IsDone reports whether every reconciler the set holds is Done. Names
// the set does not hold are not counted (statedb's meaning), so an empty
// set reports true: use Pending(names...) to make a new object wait for
// the reconcilers that must act on it.
func (s *StatusSet) IsDone() bool {
	for _, ns := range s.statuses {
		if ns.status.Kind != StatusKindDone {
			return false
		}
	}
	return true
}

// Set returns a copy of the set with name's status replaced by st (or
// added). The receiver is left unchanged. Any string is a valid name, but
// only valid UTF-8 names can be marshalled.
func (s StatusSet) Set(name string, st Status) StatusSet {
	i, found := s.search(name)
	var out []namedStatus
	if found {
		out = slices.Clone(s.statuses)
		out[i].status = st
	} else {
		out = make([]namedStatus, len(s.statuses)+1)
		copy(out, s.statuses[:i])
		out[i] = namedStatus{name: name, status: st}
		copy(out[i+1:], s.statuses[i:])
	}
	s.statuses = out
	return s
}

// Get returns name's status. A name the set does not hold is Pending with
// the set's ID and creation time: a new reconciler, or one that has not
// run since the last Pending, has work to do. Get does not allocate.
func (s StatusSet) Get(name string) Status {
	if i, found := s.search(name); found {
		return s.statuses[i].status
	}
	return Status{Kind: StatusKindPending, UpdatedAt: s.createdAt, ID: s.id}
}

// search returns where name is, or where it would be inserted, in the
// sorted statuses. A hand-written binary search so Get stays free of
// allocations and closures.
func (s StatusSet) search(name string) (int, bool) {
	lo, hi := 0, len(s.statuses)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.statuses[mid].name < name {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(s.statuses) && s.statuses[lo].name == name
}

// Names returns the names the set holds, sorted. The slice is new and the
// caller may modify it.
func (s StatusSet) Names() []string {
	names := make([]string, len(s.statuses))
	for i, ns := range s.statuses {
		names[i] = ns.name
	}
	return names
}

// All yields each held name and its status, sorted by name.
func (s StatusSet) All() iter.Seq2[string, Status] {
	return func(yield func(string, Status) bool) {
		for _, ns := range s.statuses {
			if !yield(ns.name, ns.status) {
				return
			}
		}
	}
}

// Len returns how many names the set holds.
func (s StatusSet) Len() int {
	return len(s.statuses)
}

// String returns a compact summary, one group per kind, groups ordered by
// kind name and names sorted within a group, e.g.
//
//	Done: a b; Error: c (boom); Pending: d
//
// An error message follows its name in parentheses. A name that is empty
// or holds anything but letters, digits and "-_./" is quoted. An empty set
// gives "(none)". The output depends only on the held names and statuses.
func (s StatusSet) String() string {
	if len(s.statuses) == 0 {
		return "(none)"
	}
	var kinds []StatusKind
	for _, ns := range s.statuses {
		if !slices.Contains(kinds, ns.status.Kind) {
			kinds = append(kinds, ns.status.Kind)
		}
	}
	slices.SortFunc(kinds, func(a, b StatusKind) int {
		return strings.Compare(a.String(), b.String())
	})
	var b strings.Builder
	for i, kind := range kinds {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(kind.String())
		b.WriteString(":")
		for _, ns := range s.statuses {
			if ns.status.Kind != kind {
				continue
			}
			b.WriteString(" ")
			b.WriteString(statusSetDisplayName(ns.name))
			if ns.status.Error != "" {
				b.WriteString(" (" + ns.status.Error + ")")
			}
		}
	}
	return b.String()
}

// statusSetDisplayName quotes names that would make String ambiguous.
func statusSetDisplayName(name string) string {
	plain := name != ""
	for _, r := range name {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune("-_./", r) {
			plain = false
			break
		}
	}
	if plain {
		return name
	}
	return strconv.Quote(name)
}

package reconciler

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

// These follow what statedb v0.9.4's own tests of StatusSet.Pending(names...),
// Delete, IsPendingOrRefreshing and IsDone say they mean.

func TestStatusSetDoneAndPendingPredicates(t *testing.T) {
	s := NewStatusSet()
	if s.IsPendingOrRefreshing() || !s.IsDone() {
		t.Errorf("empty set: IsPendingOrRefreshing %v IsDone %v, want false true (absent names do not count)", s.IsPendingOrRefreshing(), s.IsDone())
	}
	steps := []struct {
		name                  string
		st                    Status
		wantPending, wantDone bool
	}{
		{"a", StatusDone(), false, true},
		{"b", StatusError(errors.New("fail")), false, false},
		{"a", StatusRefreshing(), true, false},
		{"b", StatusDone(), true, false},
		{"a", StatusDone(), false, true},
		{"c", StatusPending(), true, false},
	}
	for i, step := range steps {
		s = s.Set(step.name, step.st)
		if got := s.IsPendingOrRefreshing(); got != step.wantPending {
			t.Errorf("step %d (%s=%s): IsPendingOrRefreshing %v, want %v", i, step.name, step.st.Kind, got, step.wantPending)
		}
		if got := s.IsDone(); got != step.wantDone {
			t.Errorf("step %d (%s=%s): IsDone %v, want %v", i, step.name, step.st.Kind, got, step.wantDone)
		}
	}
}

func TestStatusSetPendingNames(t *testing.T) {
	set := NewStatusSet().
		Set("existing", StatusError(errors.New("previous failure"))).
		Set("done", StatusDone())
	before := maps.Collect(set.All())
	names := []string{"new-b", "existing", "new-a", "new-b"}

	p := set.Pending(names...)

	if !slices.Equal(names, []string{"new-b", "existing", "new-a", "new-b"}) {
		t.Errorf("Pending reordered its argument: %v", names)
	}
	if got := maps.Collect(set.All()); !maps.Equal(got, before) {
		t.Errorf("Pending changed the receiver: %v, was %v", got, before)
	}
	if want := []string{"done", "existing", "new-a", "new-b"}; !slices.Equal(p.Names(), want) {
		t.Fatalf("Pending(%v).Names() = %v, want %v (repeats once, sorted)", names, p.Names(), want)
	}
	for name, st := range p.All() {
		if st.Kind != StatusKindPending || st.Error != "" || st.ID != p.id || !st.UpdatedAt.Equal(p.createdAt) {
			t.Errorf("%s = %+v, want Pending with the new set's ID %d and time", name, st, p.id)
		}
	}
	if p.id == set.id || p.id == 0 {
		t.Errorf("Pending kept ID %d (was %d), want a fresh one", p.id, set.id)
	}
	if !p.IsPendingOrRefreshing() || p.IsDone() {
		t.Errorf("after Pending: IsPendingOrRefreshing %v IsDone %v", p.IsPendingOrRefreshing(), p.IsDone())
	}
	if got := p.String(); got != "Pending: done existing new-a new-b" {
		t.Errorf("String = %q", got)
	}
	var back StatusSet
	if err := back.UnmarshalJSON(mustMarshalJSON(t, p)); err != nil || !statusSetTestEqual(back, p) {
		t.Errorf("JSON round trip: %v, %s != %s", err, back, p)
	}
	// A name passed to Pending of the zero set is held too.
	var zero StatusSet
	if z := zero.Pending("a"); z.Len() != 1 || z.Get("a").Kind != StatusKindPending || z.Get("a").ID == 0 {
		t.Errorf("zero.Pending(a) = %s (ID %d)", z, z.Get("a").ID)
	}
}

func TestStatusSetDelete(t *testing.T) {
	set := NewStatusSet().
		Set("first", StatusDone()).
		Set("middle", StatusError(errors.New("failed"))).
		Set("last", StatusRefreshing())
	original := maps.Collect(set.All())

	if got := set.Delete("missing"); !statusSetTestEqual(got, set) || got.Len() != 3 {
		t.Errorf("Delete(missing) = %s, want the set unchanged", got)
	}
	deleted := set.Delete("middle")
	if got := maps.Collect(set.All()); !maps.Equal(got, original) {
		t.Errorf("Delete changed the receiver: %v", got)
	}
	if want := []string{"first", "last"}; !slices.Equal(deleted.Names(), want) {
		t.Errorf("Delete(middle).Names() = %v, want %v", deleted.Names(), want)
	}
	if deleted.IsDone() || !deleted.IsPendingOrRefreshing() {
		t.Errorf("first Done, last Refreshing: IsDone %v IsPendingOrRefreshing %v", deleted.IsDone(), deleted.IsPendingOrRefreshing())
	}
	if p := deleted.Pending(); slices.Contains(p.Names(), "middle") || p.Len() != 2 {
		t.Errorf("Pending() after Delete(middle) holds %v: a deleted name comes back only when passed", p.Names())
	}
	if p := deleted.Pending("middle"); !slices.Contains(p.Names(), "middle") || p.Get("middle").Kind != StatusKindPending {
		t.Errorf("Pending(middle) after Delete = %s, want middle Pending again", p)
	}
	empty := deleted.Delete("first").Delete("last")
	if empty.Len() != 0 || !empty.IsDone() || empty.IsPendingOrRefreshing() {
		t.Errorf("every name deleted: %s, Len %d", empty, empty.Len())
	}
	if empty.id != set.id {
		t.Errorf("Delete changed the set's ID: %d, was %d", empty.id, set.id)
	}
}

func mustMarshalJSON(t *testing.T, s StatusSet) []byte {
	t.Helper()
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

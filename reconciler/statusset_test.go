package reconciler

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// statusSetTestEqual compares what a StatusSet serializes: its ID, names
// and statuses (not its creation time).
func statusSetTestEqual(a, b StatusSet) bool {
	if a.id != b.id || !slices.Equal(a.Names(), b.Names()) {
		return false
	}
	for name, st := range a.All() {
		if !statusTestEqual(st, b.Get(name)) {
			return false
		}
	}
	return true
}

// statusSetTestSample is a set with every kind, an error and a name that
// needs quoting in YAML.
func statusSetTestSample() StatusSet {
	at := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	return NewStatusSet().
		Set("routes", Status{Kind: StatusKindDone, UpdatedAt: at}).
		Set("addrs", Status{Kind: StatusKindError, UpdatedAt: at, Error: "boom"}).
		Set("true", Status{Kind: StatusKindRefreshing, ID: 42}).
		Set("neighbours", Status{Kind: StatusKindPending, ID: 7})
}

func TestStatusSetZeroValue(t *testing.T) {
	var s StatusSet
	if s.Len() != 0 || len(s.Names()) != 0 || s.String() != "(none)" {
		t.Errorf("zero set: Len %d, Names %v, String %q", s.Len(), s.Names(), s.String())
	}
	if got := s.Get("x"); got != (Status{}) {
		t.Errorf("zero set Get = %+v, want the zero (Pending) status", got)
	}
}

func TestStatusSetGetMissing(t *testing.T) {
	before := time.Now()
	s := NewStatusSet()
	got := s.Get("routes")
	if got.Kind != StatusKindPending || got.ID == 0 || got.ID != s.id || got.Error != "" {
		t.Fatalf("Get of a missing name = %+v, want Pending with the set's ID %d", got, s.id)
	}
	if got.UpdatedAt.Before(before) || !got.UpdatedAt.Equal(s.createdAt) {
		t.Errorf("Get of a missing name UpdatedAt = %v, want the creation time %v", got.UpdatedAt, s.createdAt)
	}
	if other := NewStatusSet(); other.id == s.id {
		t.Errorf("two new sets share ID %d", s.id)
	}
	// A set name does not change what other names see.
	s2 := s.Set("addrs", StatusDone())
	if got := s2.Get("routes"); got.ID != s.id || got.Kind != StatusKindPending {
		t.Errorf("after Set(addrs), Get(routes) = %+v", got)
	}
	if got := s2.Get("addrs"); got.Kind != StatusKindDone {
		t.Errorf("Get(addrs) = %+v, want Done", got)
	}
}

func TestStatusSetSetDoesNotAlias(t *testing.T) {
	base := NewStatusSet()
	for _, name := range []string{"e", "a", "c", "g"} {
		base = base.Set(name, StatusDone())
	}
	// Spare capacity, as a decoded or hand-built set may have, is where an
	// in-place append or insert would leak between sets.
	base.statuses = slices.Grow(base.statuses, 8)
	baseJSON, _ := json.Marshal(base)

	added := base.Set("b", StatusError(errors.New("b failed")))
	added2 := base.Set("d", StatusError(errors.New("d failed")))
	replaced := base.Set("c", StatusError(errors.New("c failed")))

	if got, _ := json.Marshal(base); string(got) != string(baseJSON) {
		t.Fatalf("Set changed the receiver:\n%s\nwas\n%s", got, baseJSON)
	}
	if want := []string{"a", "b", "c", "e", "g"}; !slices.Equal(added.Names(), want) {
		t.Errorf("added.Names() = %v, want %v", added.Names(), want)
	}
	if want := []string{"a", "c", "d", "e", "g"}; !slices.Equal(added2.Names(), want) {
		t.Errorf("added2.Names() = %v, want %v (a shared backing array?)", added2.Names(), want)
	}
	if added.Get("c").Kind != StatusKindDone || replaced.Get("c").Error != "c failed" {
		t.Errorf("replace leaked: added c = %+v, replaced c = %+v", added.Get("c"), replaced.Get("c"))
	}
	if replaced.Len() != base.Len() {
		t.Errorf("replacing changed Len to %d", replaced.Len())
	}
	// Sets of sets: modifying a set built from another does not reach back.
	again := added.Set("b", StatusDone())
	if added.Get("b").Kind != StatusKindError || again.Get("b").Kind != StatusKindDone {
		t.Errorf("Set on a derived set aliased it")
	}
	if added.id != base.id || replaced.id != base.id {
		t.Errorf("Set changed the set's ID")
	}
}

func TestStatusSetPending(t *testing.T) {
	s := statusSetTestSample()
	oldID := s.id
	before := time.Now()
	p := s.Pending()

	if p.id == oldID || p.id == 0 {
		t.Fatalf("Pending kept ID %d (old %d)", p.id, oldID)
	}
	if p.createdAt.Before(before) {
		t.Errorf("Pending did not restamp the creation time")
	}
	if !slices.Equal(p.Names(), s.Names()) {
		t.Errorf("Pending names = %v, want %v", p.Names(), s.Names())
	}
	for name, st := range p.All() {
		if st.Kind != StatusKindPending || st.ID != p.id || st.Error != "" || !st.UpdatedAt.Equal(p.createdAt) {
			t.Errorf("after Pending, %q = %+v", name, st)
		}
	}
	if got := p.Get("not-there"); got.ID != p.id || got.Kind != StatusKindPending {
		t.Errorf("after Pending, a missing name = %+v", got)
	}
	if s.Get("addrs").Kind != StatusKindError || s.id != oldID {
		t.Errorf("Pending changed the receiver")
	}
	if got := p.String(); got != "Pending: addrs neighbours routes true" {
		t.Errorf("String after Pending = %q", got)
	}
}

func TestStatusSetNamesAndAll(t *testing.T) {
	s := NewStatusSet()
	names := []string{"zeta", "alpha", "", "Mu", "beta", "alpha"}
	for i, name := range names {
		s = s.Set(name, Status{Kind: StatusKindDone, ID: uint64(i)})
	}
	want := []string{"", "Mu", "alpha", "beta", "zeta"}
	if got := s.Names(); !slices.Equal(got, want) || s.Len() != len(want) {
		t.Fatalf("Names = %q, Len %d; want %q", got, s.Len(), want)
	}
	if s.Get("alpha").ID != 5 {
		t.Errorf("a repeated Set did not replace: %+v", s.Get("alpha"))
	}
	var seen []string
	for name := range s.All() {
		seen = append(seen, name)
		if name == "alpha" {
			break
		}
	}
	if !slices.Equal(seen, want[:3]) {
		t.Errorf("All with break yielded %q", seen)
	}
	got := s.Names()
	got[0] = "changed"
	if s.Names()[0] != "" {
		t.Errorf("Names returned the internal slice")
	}
}

func TestStatusSetString(t *testing.T) {
	s := statusSetTestSample()
	want := "Done: routes; Error: addrs (boom); Pending: neighbours; Refreshing: true"
	if got := s.String(); got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
	// Same content, other insertion order, other ID: same string.
	other := NewStatusSet()
	for _, name := range []string{"true", "neighbours", "addrs", "routes"} {
		other = other.Set(name, s.Get(name))
	}
	if got := other.String(); got != want {
		t.Errorf("String depends on insertion order: %q", got)
	}
	odd := NewStatusSet().
		Set("a b", StatusDone()).
		Set("", StatusDone()).
		Set("x;y", StatusError(errors.New("e1"))).
		Set("w", StatusError(errors.New("e2"))).
		Set("bad", Status{Kind: StatusKind(9)})
	if got, want := odd.String(), `Done: "" "a b"; Error: w (e2) "x;y" (e1); StatusKind(9): bad`; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestStatusSetGetDoesNotAllocate(t *testing.T) {
	s := statusSetTestSample()
	if allocs := testing.AllocsPerRun(100, func() {
		_ = s.Get("routes")
		_ = s.Get("missing")
	}); allocs != 0 {
		t.Errorf("Get allocates %v times, want 0", allocs)
	}
}

func TestStatusSetFieldNamesMatchTags(t *testing.T) {
	typ := reflect.TypeFor[Status]()
	var tags []string
	for i := range typ.NumField() {
		field := typ.Field(i)
		yamlName, _, _ := strings.Cut(field.Tag.Get("yaml"), ",")
		jsonName, _, _ := strings.Cut(field.Tag.Get("json"), ",")
		if yamlName != jsonName {
			t.Errorf("field %s: yaml name %q, json name %q", field.Name, yamlName, jsonName)
		}
		tags = append(tags, yamlName)
	}
	if !slices.Equal(tags, statusFieldNames) {
		t.Errorf("Status tags %q, statusFieldNames %q", tags, statusFieldNames)
	}
}

package reconciler

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
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

func TestStatusSetJSON(t *testing.T) {
	s := statusSetTestSample()
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":` + strconv.FormatUint(s.id, 10) + `,"statuses":{` +
		`"addrs":{"kind":"Error","updated-at":"2024-05-01T12:00:00Z","error":"boom"},` +
		`"neighbours":{"kind":"Pending","id":7},` +
		`"routes":{"kind":"Done","updated-at":"2024-05-01T12:00:00Z"},` +
		`"true":{"kind":"Refreshing","id":42}}}`
	if string(data) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", data, want)
	}
	var got StatusSet
	if err := json.Unmarshal(data, &got); err != nil || !statusSetTestEqual(got, s) {
		t.Errorf("round trip = %v, %v", got, err)
	}
	if !got.createdAt.IsZero() {
		t.Errorf("decoded createdAt = %v, want zero", got.createdAt)
	}

	empty := StatusSet{id: 9}
	if data, _ := json.Marshal(empty); string(data) != `{"id":9}` {
		t.Errorf("Marshal(empty) = %s", data)
	}
	// Nested in a user's object, by value.
	type obj struct {
		Name     string    `json:"name"`
		Statuses StatusSet `json:"statuses"`
	}
	data, err = json.Marshal(obj{"x", s})
	if err != nil {
		t.Fatal(err)
	}
	var o obj
	if err := json.Unmarshal(data, &o); err != nil || o.Name != "x" || !statusSetTestEqual(o.Statuses, s) {
		t.Errorf("nested round trip = %+v, %v", o, err)
	}
	var z StatusSet
	if err := json.Unmarshal([]byte(`{}`), &z); err != nil || z.id != 0 || z.Len() != 0 {
		t.Errorf(`Unmarshal({}) = %v, %v`, z, err)
	}
}

func TestStatusSetMarshalFailures(t *testing.T) {
	badName := NewStatusSet().Set("ok", StatusDone()).Set("bad\xff", StatusDone())
	if _, err := json.Marshal(badName); !errors.Is(err, ErrMalformedStatusSet) {
		t.Errorf("JSON of a non-UTF-8 name: %v", err)
	}
	if _, err := yaml.Marshal(badName); !errors.Is(err, ErrMalformedStatusSet) {
		t.Errorf("YAML of a non-UTF-8 name: %v", err)
	}
	badKind := NewStatusSet().Set("x", Status{Kind: 200})
	if _, err := json.Marshal(badKind); !errors.Is(err, ErrUnknownStatusKind) {
		t.Errorf("JSON of an invalid kind: %v", err)
	}
	if _, err := yaml.Marshal(badKind); !errors.Is(err, ErrUnknownStatusKind) {
		t.Errorf("YAML of an invalid kind: %v", err)
	}
}

func TestStatusSetJSONStrict(t *testing.T) {
	cases := []struct {
		in     string
		kindOf bool // fails with ErrUnknownStatusKind rather than ErrMalformedStatusSet
	}{
		{in: `null`}, {in: `[]`}, {in: `5`}, {in: `"x"`}, {in: `true`},
		{in: `{"id":1,"extra":2}`},
		{in: `{"ID":1}`},
		{in: `{"id":1,"id":2}`},
		{in: `{"id":null}`},
		{in: `{"id":-1}`},
		{in: `{"id":1.5}`},
		{in: `{"id":"1"}`},
		{in: `{"statuses":null}`},
		{in: `{"statuses":[]}`},
		{in: `{"statuses":{},"statuses":{}}`},
		{in: `{"statuses":{"a":null}}`},
		{in: `{"statuses":{"a":5}}`},
		{in: `{"statuses":{"a":{"kind":"Done","bogus":1}}}`},
		{in: `{"statuses":{"a":{"kind":"Done"},"a":{"kind":"Error"}}}`},
		{in: `{"statuses":{"a":{"kind":"Bogus"}}}`, kindOf: true},
		{in: `{"statuses":{"a":{"kind":null}}}`, kindOf: true},
		{in: `{"statuses":{"a":{"kind":3}}}`, kindOf: true},
	}
	for _, c := range cases {
		s := statusSetTestSample()
		orig := s
		err := json.Unmarshal([]byte(c.in), &s)
		want := ErrMalformedStatusSet
		if c.kindOf {
			want = ErrUnknownStatusKind
		}
		if !errors.Is(err, want) {
			t.Errorf("Unmarshal(%s) error = %v, want %v", c.in, err, want)
		}
		if !statusSetTestEqual(s, orig) {
			t.Errorf("failed Unmarshal(%s) changed the set", c.in)
		}
	}
	// Trailing data when called directly.
	var s StatusSet
	if err := s.UnmarshalJSON([]byte(`{"id":1} {}`)); !errors.Is(err, ErrMalformedStatusSet) {
		t.Errorf("trailing data: %v", err)
	}
}

func TestStatusSetYAML(t *testing.T) {
	s := statusSetTestSample()
	data, err := yaml.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := "id: " + strconv.FormatUint(s.id, 10) + "\nstatuses:\n" +
		"    addrs:\n        kind: Error\n        updated-at: 2024-05-01T12:00:00Z\n        error: boom\n" +
		"    neighbours:\n        kind: Pending\n        id: 7\n" +
		"    routes:\n        kind: Done\n        updated-at: 2024-05-01T12:00:00Z\n" +
		"    \"true\":\n        kind: Refreshing\n        id: 42\n"
	if string(data) != want {
		t.Errorf("Marshal =\n%s\nwant\n%s", data, want)
	}
	var got StatusSet
	if err := yaml.Unmarshal(data, &got); err != nil || !statusSetTestEqual(got, s) {
		t.Errorf("round trip = %v, %v", got, err)
	}
	if data, _ := yaml.Marshal(StatusSet{id: 9}); string(data) != "id: 9\n" {
		t.Errorf("Marshal(empty) = %q", data)
	}
	for in, want := range map[string]StatusSet{
		"{}":                        {},
		"statuses: {}":              {},
		"id: 3\nstatuses:\n  a: {}": StatusSet{id: 3}.Set("a", Status{}),
	} {
		var got StatusSet
		if err := yaml.Unmarshal([]byte(in), &got); err != nil || !statusSetTestEqual(got, want) {
			t.Errorf("Unmarshal(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	// Aliases are followed.
	type doc struct {
		Shared Status    `yaml:"shared"`
		Set    StatusSet `yaml:"set"`
	}
	var d doc
	in := "shared: &d {kind: Done}\nset:\n  id: 1\n  statuses:\n    a: *d\n    b: *d\n"
	if err := yaml.Unmarshal([]byte(in), &d); err != nil || d.Set.Get("b").Kind != StatusKindDone || d.Set.Len() != 2 {
		t.Errorf("aliases: %v, %v", d.Set, err)
	}
}

func TestStatusSetYAMLStrict(t *testing.T) {
	cases := []struct {
		in     string
		kindOf bool
	}{
		{in: `[]`}, {in: `5`}, {in: `x`},
		{in: "id: 1\nextra: 2"},
		{in: "ID: 1"},
		{in: "id: 1\nid: 2"},
		{in: "id: ~"},
		{in: "id: -1"},
		{in: "id: [1]"},
		{in: "1: x"},
		{in: "statuses: ~"},
		{in: "statuses: []"},
		{in: "statuses: {}\nstatuses: {}"},
		{in: "statuses: {a: ~}"},
		{in: "statuses: {a: 5}"},
		{in: "statuses: {1: {kind: Done}}"},
		{in: "statuses: {a: {kind: Done, bogus: 1}}"},
		{in: "statuses: {a: {kind: Done, kind: Error}}"},
		{in: "statuses: {a: {kind: Done}, a: {kind: Error}}"},
		{in: "base: &b {kind: Done}\nstatuses: {a: {<<: *b}}"},
		{in: "statuses: {a: {kind: Bogus}}", kindOf: true},
		{in: "statuses: {a: {kind: ~}}", kindOf: true},
		{in: "statuses: {a: {kind: 2}}", kindOf: true},
		{in: "statuses: {a: {kind: [Done]}}", kindOf: true},
	}
	for _, c := range cases {
		s := statusSetTestSample()
		orig := s
		err := yaml.Unmarshal([]byte(c.in), &s)
		want := ErrMalformedStatusSet
		if c.kindOf {
			want = ErrUnknownStatusKind
		}
		if !errors.Is(err, want) {
			t.Errorf("Unmarshal(%q) error = %v, want %v", c.in, err, want)
		}
		if !statusSetTestEqual(s, orig) {
			t.Errorf("failed Unmarshal(%q) changed the set", c.in)
		}
	}
}

func BenchmarkStatusSetGet(b *testing.B) {
	s := NewStatusSet()
	for i := range 8 {
		s = s.Set("reconciler-"+strconv.Itoa(i), StatusDone())
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Get("reconciler-5")
		_ = s.Get("missing")
	}
}

func BenchmarkStatusSetSet(b *testing.B) {
	s := NewStatusSet()
	for i := range 8 {
		s = s.Set("reconciler-"+strconv.Itoa(i), StatusDone())
	}
	st := StatusDone()
	b.ReportAllocs()
	for b.Loop() {
		_ = s.Set("reconciler-5", st)
	}
}

package reconciler

import (
	"encoding/json"
	"errors"
	"strconv"
	"testing"

	"go.yaml.in/yaml/v3"
)

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

package reconciler

import (
	"bytes"
	"encoding/json"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The fuzz targets check one property of every decoder: for any input it
// either fails, or yields a value that marshals without error and decodes
// back to the same value. None may panic. The seeds run as ordinary tests.

var statusKindFuzzSeeds = []string{
	`"Pending"`, `"Refreshing"`, `"Done"`, `"Error"`, `"Unset"`, `"\u0044one"`, `"unset"`,
	`null`, `5`, `"done"`, `"Bogus"`, `""`, `["Done"]`, `{"kind":"Done"}`,
}

func FuzzStatusKindJSON(f *testing.F) {
	for _, seed := range statusKindFuzzSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var k StatusKind
		if err := json.Unmarshal(data, &k); err != nil {
			return
		}
		if !k.Valid() {
			t.Fatalf("decoded invalid kind %v from %q", k, data)
		}
		out, err := json.Marshal(k)
		if err != nil {
			t.Fatalf("Marshal(%v) after decoding %q: %v", k, data, err)
		}
		var again StatusKind
		if err := json.Unmarshal(out, &again); err != nil || again != k {
			t.Fatalf("round trip of %v via %s = %v, %v", k, out, again, err)
		}
	})
}

func FuzzStatusKindYAML(f *testing.F) {
	for _, seed := range []string{"Done", "'Error'", `"Pending"`, "!!str Refreshing", "~", "5", "done", "[Done]", "{a: b}", "&a Done", "!!binary RG9uZQ==", "Unset", "''"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var k StatusKind
		if err := yaml.Unmarshal(data, &k); err != nil {
			return
		}
		if !k.Valid() {
			t.Fatalf("decoded invalid kind %v from %q", k, data)
		}
		out, err := yaml.Marshal(k)
		if err != nil {
			t.Fatalf("Marshal(%v) after decoding %q: %v", k, data, err)
		}
		var again StatusKind
		if err := yaml.Unmarshal(out, &again); err != nil || again != k {
			t.Fatalf("round trip of %v via %q = %v, %v", k, out, again, err)
		}
	})
}

func FuzzStatusKindKey(f *testing.F) {
	for _, seed := range []string{"P", "R", "D", "E", "U", "?", "", "DD", "d", "u", "\x00", "\x03", "\x04", "\x05", "\xff"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if k, err := StatusKindFromKey(data); err == nil {
			if !k.Valid() || !bytes.Equal(k.Key(), data) {
				t.Fatalf("StatusKindFromKey(%q) = %v whose key is %q", data, k, k.Key())
			}
		}
		if len(data) == 0 {
			return
		}
		// Read the first byte as a kind: its key decodes back to it
		// exactly when it is valid.
		k := StatusKind(data[0])
		got, err := StatusKindFromKey(k.Key())
		if k.Valid() != (err == nil) || (err == nil && got != k) {
			t.Fatalf("StatusKindFromKey(%v.Key()) = %v, %v", k, got, err)
		}
	})
}

var statusFuzzSeeds = []string{
	`{"kind":"Done","updated-at":"2024-05-01T12:00:00Z"}`,
	`{"kind":"Error","updated-at":"2001-12-14T21:59:43.1-05:00","error":"boom","id":3}`,
	`{"kind":"Pending","id":18446744073709551615}`,
	`{"kind":"Unset","updated-at":"2024-05-01T12:00:00Z"}`, `{"kind":""}`,
	`{}`, `null`, `{"kind":null}`, `{"kind":"Bogus"}`, `{"id":-1}`,
	`{"updated-at":"0000-01-01T00:00:00+01:00"}`, `{"error":"\ud800"}`,
}

func FuzzStatusJSON(f *testing.F) {
	for _, seed := range statusFuzzSeeds {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Status
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal(%+v) after decoding %q: %v", s, data, err)
		}
		var again Status
		if err := json.Unmarshal(out, &again); err != nil || !statusTestEqual(again, s) {
			t.Fatalf("round trip of %+v via %s = %+v, %v", s, out, again, err)
		}
	})
}

func FuzzStatusYAML(f *testing.F) {
	for _, seed := range []string{
		"kind: Done\nupdated-at: 2024-05-01T12:00:00Z\n",
		"kind: Error\nerror: '123'\nid: 0x10\n",
		"kind: Unset\n",
		"updated-at: 2001-12-14 21:59:43.10 -5\n",
		"kind: ~\n", "kind: Bogus\n", "error: !!binary /w==\n", "{}", "[]",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s Status
		if err := yaml.Unmarshal(data, &s); err != nil {
			return
		}
		out, err := yaml.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal(%+v) after decoding %q: %v", s, data, err)
		}
		var again Status
		if err := yaml.Unmarshal(out, &again); err != nil || !statusTestEqual(again, s) {
			t.Fatalf("round trip of %+v via %q = %+v, %v", s, out, again, err)
		}
	})
}

func FuzzStatusSetJSON(f *testing.F) {
	for _, seed := range []string{
		`{"id":1,"statuses":{"a":{"kind":"Done"},"b":{"kind":"Error","error":"boom"}}}`,
		`{"id":2,"statuses":{"a":{"kind":"Unset"},"b":{"kind":"Pending","id":2}}}`,
		`{"id":18446744073709551615}`, `{}`, `{"statuses":{}}`, `{"statuses":{"":{}}}`,
		`null`, `[]`, `{"id":1,"id":2}`, `{"statuses":{"a":{},"a":{}}}`,
		`{"statuses":{"a":{"kind":"Bogus"}}}`, `{"statuses":{"a":{"x":1}}}`, `{"other":1}`,
		`{"statuses":{"\ud800":{},"\udc00":{}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s StatusSet
		if err := json.Unmarshal(data, &s); err != nil {
			return
		}
		out, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal(%v) after decoding %q: %v", s, data, err)
		}
		var again StatusSet
		if err := json.Unmarshal(out, &again); err != nil || !statusSetTestEqual(again, s) {
			t.Fatalf("round trip of %v via %s = %v, %v", s, out, again, err)
		}
	})
}

func FuzzStatusSetYAML(f *testing.F) {
	for _, seed := range []string{
		"id: 1\nstatuses:\n  a: {kind: Done}\n  b: {kind: Error, error: boom}\n",
		"id: 2\nstatuses:\n  a: {kind: Unset}\n",
		"id: 0x10\n", "{}", "statuses: {}", "statuses: {'': {}}", "statuses: {'true': {kind: Refreshing, id: 7}}",
		"~", "[]", "id: 1\nid: 2", "statuses: {a: {}, a: {}}", "statuses: {a: {kind: ~}}",
		"statuses: {a: {kind: Bogus}}", "statuses: {1: {}}", "other: 1",
		"s: &s {kind: Done}\nstatuses: {a: *s}", "statuses: {a: {error: !!binary /w==}}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var s StatusSet
		if err := yaml.Unmarshal(data, &s); err != nil {
			return
		}
		out, err := yaml.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal(%v) after decoding %q: %v", s, data, err)
		}
		var again StatusSet
		if err := yaml.Unmarshal(out, &again); err != nil || !statusSetTestEqual(again, s) {
			t.Fatalf("round trip of %v via %q = %v, %v", s, out, again, err)
		}
	})
}

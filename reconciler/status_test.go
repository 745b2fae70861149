package reconciler

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// statusTestKinds are the valid kinds, in order.
var statusTestKinds = []StatusKind{StatusKindPending, StatusKindRefreshing, StatusKindDone, StatusKindError, StatusKindUnset}

// statusTestEqual compares statuses with time.Equal for UpdatedAt: a
// decoded time has no monotonic reading and may have another *Location.
func statusTestEqual(a, b Status) bool {
	return a.Kind == b.Kind && a.UpdatedAt.Equal(b.UpdatedAt) && a.Error == b.Error && a.ID == b.ID
}

func TestStatusKindZeroIsPending(t *testing.T) {
	var k StatusKind
	if k != StatusKindPending {
		t.Fatalf("zero StatusKind = %v, want Pending", k)
	}
	var s Status
	if s.Kind != StatusKindPending || !s.IsPendingOrRefreshing() {
		t.Fatalf("zero Status = %+v, want Pending", s)
	}
}

func TestStatusKindString(t *testing.T) {
	cases := []struct {
		kind StatusKind
		want string
	}{
		{StatusKindPending, "Pending"},
		{StatusKindRefreshing, "Refreshing"},
		{StatusKindDone, "Done"},
		{StatusKindError, "Error"},
		{StatusKindUnset, "Unset"},
		{StatusKind(5), "StatusKind(5)"},
		{StatusKind(255), "StatusKind(255)"},
	}
	for _, c := range cases {
		if got := c.kind.String(); got != c.want {
			t.Errorf("StatusKind(%d).String() = %q, want %q", uint8(c.kind), got, c.want)
		}
		if got, want := c.kind.Valid(), !strings.HasPrefix(c.want, "StatusKind("); got != want {
			t.Errorf("StatusKind(%d).Valid() = %v, want %v", uint8(c.kind), got, want)
		}
	}
}

func TestParseStatusKind(t *testing.T) {
	for _, k := range statusTestKinds {
		got, err := ParseStatusKind(k.String())
		if err != nil || got != k {
			t.Errorf("ParseStatusKind(%q) = %v, %v; want %v, nil", k.String(), got, err, k)
		}
	}
	for _, bad := range []string{"", "done", "DONE", " Done", "Done ", "Bogus", "StatusKind(5)", "unset", "U", "0", "D"} {
		got, err := ParseStatusKind(bad)
		if !errors.Is(err, ErrUnknownStatusKind) {
			t.Errorf("ParseStatusKind(%q) = %v, %v; want ErrUnknownStatusKind", bad, got, err)
			continue
		}
		if !strings.Contains(err.Error(), `"`+bad+`"`) {
			t.Errorf("ParseStatusKind(%q) error %q does not quote the input", bad, err)
		}
	}
}

func TestStatusKindText(t *testing.T) {
	for _, k := range statusTestKinds {
		text, err := k.MarshalText()
		if err != nil || string(text) != k.String() {
			t.Errorf("%v.MarshalText() = %q, %v", k, text, err)
		}
	}
	if _, err := StatusKind(7).MarshalText(); !errors.Is(err, ErrUnknownStatusKind) {
		t.Errorf("StatusKind(7).MarshalText() error = %v, want ErrUnknownStatusKind", err)
	}
	k := StatusKindDone
	if err := k.UnmarshalText([]byte("nope")); !errors.Is(err, ErrUnknownStatusKind) {
		t.Errorf("UnmarshalText(nope) error = %v", err)
	}
	if k != StatusKindDone {
		t.Errorf("failed UnmarshalText changed the kind to %v", k)
	}

	// MarshalText makes the kind usable as a JSON map key.
	in := map[StatusKind]int{StatusKindDone: 1, StatusKindError: 2}
	data, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != `{"Done":1,"Error":2}` {
		t.Errorf("map key JSON = %s", data)
	}
	var out map[StatusKind]int
	if err := json.Unmarshal(data, &out); err != nil || len(out) != 2 || out[StatusKindError] != 2 {
		t.Errorf("map key round trip = %v, %v", out, err)
	}
}

func TestStatusKindJSON(t *testing.T) {
	for _, k := range statusTestKinds {
		data, err := json.Marshal(k)
		if err != nil {
			t.Fatalf("Marshal(%v): %v", k, err)
		}
		if want := `"` + k.String() + `"`; string(data) != want {
			t.Errorf("Marshal(%v) = %s, want %s", k, data, want)
		}
		got := StatusKind(99)
		if err := json.Unmarshal(data, &got); err != nil || got != k {
			t.Errorf("Unmarshal(%s) = %v, %v; want %v", data, got, err, k)
		}
	}
	if _, err := json.Marshal(StatusKind(5)); !errors.Is(err, ErrUnknownStatusKind) {
		t.Errorf("Marshal(StatusKind(5)) error = %v, want ErrUnknownStatusKind", err)
	}
	for _, bad := range []string{`5`, `0`, `null`, `"done"`, `"Bogus"`, `""`, `true`, `["Done"]`, `{"Done":1}`} {
		k := StatusKindError
		err := json.Unmarshal([]byte(bad), &k)
		if !errors.Is(err, ErrUnknownStatusKind) {
			t.Errorf("Unmarshal(%s) error = %v, want ErrUnknownStatusKind", bad, err)
		}
		if k != StatusKindError {
			t.Errorf("failed Unmarshal(%s) changed the kind to %v", bad, k)
		}
	}
	// Escapes are still a JSON string with a known name.
	var k StatusKind
	if err := json.Unmarshal([]byte(`"\u0044one"`), &k); err != nil || k != StatusKindDone {
		t.Errorf(`Unmarshal("\u0044one") = %v, %v`, k, err)
	}
	// A null kind inside a status is refused too, not read as Pending.
	var s Status
	if err := json.Unmarshal([]byte(`{"kind":null}`), &s); !errors.Is(err, ErrUnknownStatusKind) {
		t.Errorf(`Unmarshal({"kind":null}) error = %v`, err)
	}
}

func TestStatusKindYAML(t *testing.T) {
	for _, k := range statusTestKinds {
		data, err := yaml.Marshal(k)
		if err != nil {
			t.Fatalf("Marshal(%v): %v", k, err)
		}
		if want := k.String() + "\n"; string(data) != want {
			t.Errorf("Marshal(%v) = %q, want %q", k, data, want)
		}
		got := StatusKind(99)
		if err := yaml.Unmarshal(data, &got); err != nil || got != k {
			t.Errorf("Unmarshal(%q) = %v, %v; want %v", data, got, err, k)
		}
	}
	for _, good := range []string{`'Done'`, `"Done"`, `!!str Done`, "x: &a Done\ny: *a"} {
		var k StatusKind
		var err error
		if strings.HasPrefix(good, "x:") {
			var m map[string]StatusKind
			err = yaml.Unmarshal([]byte(good), &m)
			k = m["y"]
		} else {
			err = yaml.Unmarshal([]byte(good), &k)
		}
		if err != nil || k != StatusKindDone {
			t.Errorf("Unmarshal(%q) = %v, %v; want Done", good, k, err)
		}
	}
	if _, err := yaml.Marshal(StatusKind(5)); !errors.Is(err, ErrUnknownStatusKind) {
		t.Errorf("Marshal(StatusKind(5)) error = %v, want ErrUnknownStatusKind", err)
	}
	for _, bad := range []string{`[Done]`, `{Done: 1}`, `done`, `Bogus`, `5`, `true`, `""`, `!!binary RG9uZQ==`} {
		k := StatusKindError
		err := yaml.Unmarshal([]byte(bad), &k)
		if !errors.Is(err, ErrUnknownStatusKind) {
			t.Errorf("Unmarshal(%q) error = %v, want ErrUnknownStatusKind", bad, err)
		}
		if k != StatusKindError {
			t.Errorf("failed Unmarshal(%q) changed the kind to %v", bad, k)
		}
	}
	// Called directly, a null node is refused (yaml.v3 itself never
	// passes one).
	var k StatusKind
	if err := k.UnmarshalYAML(&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "~"}); !errors.Is(err, ErrUnknownStatusKind) {
		t.Errorf("UnmarshalYAML(null) error = %v", err)
	}
}

func TestStatusKindKey(t *testing.T) {
	seen := map[string]StatusKind{}
	for _, k := range statusTestKinds {
		key := k.Key()
		if len(key) != 1 || cap(key) != 1 {
			t.Errorf("%v.Key() = %q (cap %d), want one byte with cap 1", k, key, cap(key))
		}
		if prev, dup := seen[string(key)]; dup {
			t.Errorf("%v and %v share key %q", prev, k, key)
		}
		seen[string(key)] = k
		got, err := StatusKindFromKey(key)
		if err != nil || got != k {
			t.Errorf("StatusKindFromKey(%q) = %v, %v; want %v", key, got, err, k)
		}
	}
	invalid := StatusKind(5).Key()
	if _, dup := seen[string(invalid)]; dup || len(invalid) == 0 {
		t.Errorf("invalid kind key %q collides with a valid one or is empty", invalid)
	}
	if !StatusKind(200).Key().Equal(invalid) {
		t.Errorf("invalid kinds have different keys: %q, %q", StatusKind(200).Key(), invalid)
	}
	for _, bad := range [][]byte{nil, {}, invalid, []byte("DD"), []byte("d"), []byte("u"), {0}, {3}, {4}} {
		if k, err := StatusKindFromKey(bad); !errors.Is(err, ErrUnknownStatusKind) {
			t.Errorf("StatusKindFromKey(%q) = %v, %v; want ErrUnknownStatusKind", bad, k, err)
		}
	}

	// Appending to a returned key must not write into the shared array.
	before := StatusKindDone.Key()[0]
	_ = append(StatusKindPending.Key(), 'X')
	if StatusKindDone.Key()[0] != before || StatusKindRefreshing.Key()[0] == 'X' {
		t.Errorf("append to a key corrupted the shared keys")
	}

	k := StatusKindError
	if allocs := testing.AllocsPerRun(100, func() { _ = k.Key(); _ = StatusKind(9).Key() }); allocs != 0 {
		t.Errorf("Key allocates %v times, want 0", allocs)
	}
}

func TestStatusConstructors(t *testing.T) {
	before := time.Now()
	p, r, d, u := StatusPending(), StatusRefreshing(), StatusDone(), StatusUnset()
	e := StatusError(errors.New("boom"))
	after := time.Now()

	for _, c := range []struct {
		got      Status
		kind     StatusKind
		hasID    bool
		errorMsg string
	}{
		{p, StatusKindPending, true, ""},
		{r, StatusKindRefreshing, true, ""},
		{d, StatusKindDone, false, ""},
		{e, StatusKindError, false, "boom"},
		{u, StatusKindUnset, false, ""},
	} {
		if c.got.Kind != c.kind || c.got.Error != c.errorMsg || (c.got.ID != 0) != c.hasID {
			t.Errorf("constructor for %v gave %+v", c.kind, c.got)
		}
		if c.got.UpdatedAt.Before(before) || c.got.UpdatedAt.After(after) {
			t.Errorf("%v UpdatedAt %v not within the call", c.kind, c.got.UpdatedAt)
		}
		if got, want := c.got.IsPendingOrRefreshing(), c.hasID; got != want {
			t.Errorf("%v.IsPendingOrRefreshing() = %v", c.kind, got)
		}
	}
	if p.ID == r.ID {
		t.Errorf("Pending and Refreshing share ID %d", p.ID)
	}
	if s := StatusError(nil); s.Kind != StatusKindError || s.Error != "unknown error" {
		t.Errorf("StatusError(nil) = %+v", s)
	}
}

func TestStatusIDsUnique(t *testing.T) {
	const goroutines, each = 4, 1000
	ids := make([][]uint64, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range each {
				if i%2 == 0 {
					ids[g] = append(ids[g], StatusPending().ID)
				} else {
					ids[g] = append(ids[g], newStatusID())
				}
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, list := range ids {
		for _, id := range list {
			if id == 0 || seen[id] {
				t.Fatalf("ID %d is zero or repeated", id)
			}
			seen[id] = true
		}
	}
}

func TestStatusString(t *testing.T) {
	now := time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		s    Status
		want string
	}{
		{Status{}, "Pending"},
		{Status{Kind: StatusKindDone, UpdatedAt: now.Add(-3 * time.Second)}, "Done (3s ago)"},
		{Status{Kind: StatusKindError, Error: "boom", UpdatedAt: now.Add(-90 * time.Second)}, "Error: boom (1m ago)"},
		{Status{Kind: StatusKindError, Error: "boom"}, "Error: boom"},
		{Status{Kind: StatusKindRefreshing, UpdatedAt: now.Add(-250 * time.Millisecond), ID: 5}, "Refreshing (250ms ago)"},
		{Status{Kind: StatusKindDone, UpdatedAt: now.Add(-5 * time.Hour)}, "Done (5h ago)"},
		{Status{Kind: StatusKindDone, UpdatedAt: now.Add(-50 * time.Hour)}, "Done (2d ago)"},
		{Status{Kind: StatusKindDone, UpdatedAt: now.Add(time.Minute)}, "Done (0s ago)"},
		{Status{Kind: StatusKind(9)}, "StatusKind(9)"},
	}
	for _, c := range cases {
		if got := c.s.stringAt(now); got != c.want {
			t.Errorf("%+v: got %q, want %q", c.s, got, c.want)
		}
	}
	if got := StatusDone().String(); !strings.HasPrefix(got, "Done (") || !strings.HasSuffix(got, " ago)") {
		t.Errorf("StatusDone().String() = %q", got)
	}
}

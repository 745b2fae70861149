package reconciler

import (
	"encoding/json"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestStatusKindUnsetIsExplicit: Unset is a kind of its own, never the
// zero value, with a stable number (stored objects and index keys depend
// on it), and StatusUnset asks for nothing.
func TestStatusKindUnsetIsExplicit(t *testing.T) {
	if StatusKindUnset == StatusKind(0) || StatusKindUnset != 4 {
		t.Errorf("StatusKindUnset = %d, want 4: after Error, and not the zero value", uint8(StatusKindUnset))
	}
	u := StatusUnset()
	if u.Kind != StatusKindUnset || u.ID != 0 || u.Error != "" || u.UpdatedAt.IsZero() || u.IsPendingOrRefreshing() {
		t.Errorf("StatusUnset() = %+v, want an Unset status stamped now, with no ID, asking nothing", u)
	}
	if got := string(StatusKindUnset.Key()); got != "U" {
		t.Errorf("Unset's index key %q, want U", got)
	}
}

// TestStatusSetUnset: a StatusSet holds an Unset entry like any other:
// IsDone is false while it is there (statedb v0.9.4's meaning: every held
// name Done), IsPendingOrRefreshing false (it asks nothing), and both
// codecs carry it.
func TestStatusSetUnset(t *testing.T) {
	s := NewStatusSet().Pending("a", "b").Set("a", StatusDone()).Set("b", StatusUnset())
	if got := s.Get("b").Kind; got != StatusKindUnset {
		t.Fatalf("Get(b) = %s, want Unset", got)
	}
	if s.IsDone() || s.IsPendingOrRefreshing() {
		t.Errorf("IsDone %v, IsPendingOrRefreshing %v; want false, false", s.IsDone(), s.IsPendingOrRefreshing())
	}
	if got, want := s.String(), "Done: a; Unset: b"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if done := s.Set("b", StatusDone()); !done.IsDone() {
		t.Errorf("IsDone false once b is Done too")
	}
	if p := s.Pending(); p.Get("b").Kind != StatusKindPending {
		t.Errorf("Pending() leaves b %s, want every held name Pending", p.Get("b").Kind)
	}

	data, err := json.Marshal(s)
	if err != nil || !strings.Contains(string(data), `"b":{"kind":"Unset"`) {
		t.Fatalf("Marshal = %s, %v; want b's kind Unset", data, err)
	}
	var back StatusSet
	if err := json.Unmarshal(data, &back); err != nil || !statusSetTestEqual(back, s) {
		t.Errorf("JSON round trip = %v, %v", back, err)
	}
	ydata, err := yaml.Marshal(s)
	if err != nil || !strings.Contains(string(ydata), "kind: Unset") {
		t.Fatalf("YAML = %s, %v; want b's kind Unset", ydata, err)
	}
	var yback StatusSet
	if err := yaml.Unmarshal(ydata, &yback); err != nil || !statusSetTestEqual(yback, s) {
		t.Errorf("YAML round trip = %v, %v", yback, err)
	}
}

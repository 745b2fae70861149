package reconciler

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// statusTestSamples covers every kind, zero and non-UTC times, and errors.
func statusTestSamples() []Status {
	zone := time.FixedZone("", -5*3600)
	return []Status{
		{},
		StatusPending(),
		StatusRefreshing(),
		StatusDone(),
		StatusError(errors.New(`multi "quoted"\nline: error`)),
		{Kind: StatusKindDone, UpdatedAt: time.Date(2001, 12, 14, 21, 59, 43, 100, zone)},
		{Kind: StatusKindPending, ID: 1<<64 - 1},
		{Kind: StatusKindError, Error: "true"},
		StatusUnset(),
		{Kind: StatusKindUnset},
	}
}

func TestStatusJSON(t *testing.T) {
	for _, s := range statusTestSamples() {
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", s, err)
		}
		var got Status
		if err := json.Unmarshal(data, &got); err != nil || !statusTestEqual(got, s) {
			t.Errorf("round trip of %+v via %s = %+v, %v", s, data, got, err)
		}
	}
	data, err := json.Marshal(Status{Kind: StatusKindError, UpdatedAt: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), Error: "x", ID: 3})
	if want := `{"kind":"Error","updated-at":"2020-01-01T00:00:00Z","error":"x","id":3}`; err != nil || string(data) != want {
		t.Errorf("Marshal = %s, %v; want %s", data, err, want)
	}
	if data, _ := json.Marshal(Status{}); string(data) != `{"kind":"Pending"}` {
		t.Errorf("Marshal(zero) = %s", data)
	}
	if _, err := json.Marshal(Status{Kind: 5}); !errors.Is(err, ErrUnknownStatusKind) {
		t.Errorf("Marshal of an invalid kind: %v", err)
	}
	got := Status{Kind: StatusKindDone}
	if err := json.Unmarshal([]byte(`{"id":4}`), &got); err != nil || got.Kind != StatusKindDone || got.ID != 4 {
		t.Errorf("a missing kind must leave the kind alone: %+v, %v", got, err)
	}
	got = Status{}
	if err := json.Unmarshal([]byte(`{"id":4}`), &got); err != nil || got.Kind != StatusKindPending {
		t.Errorf("a missing kind into a zero Status must be Pending: %+v, %v", got, err)
	}
	if err := json.Unmarshal([]byte(`{"kind":"Bogus"}`), &got); !errors.Is(err, ErrUnknownStatusKind) {
		t.Errorf("unknown kind: %v", err)
	}
}

func TestStatusYAML(t *testing.T) {
	for _, s := range statusTestSamples() {
		data, err := yaml.Marshal(s)
		if err != nil {
			t.Fatalf("Marshal(%+v): %v", s, err)
		}
		var got Status
		if err := yaml.Unmarshal(data, &got); err != nil || !statusTestEqual(got, s) {
			t.Errorf("round trip of %+v via %q = %+v, %v", s, data, got, err)
		}
	}
	data, err := yaml.Marshal(Status{Kind: StatusKindError, UpdatedAt: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC), Error: "x", ID: 3})
	if want := "kind: Error\nupdated-at: 2020-01-01T00:00:00Z\nerror: x\nid: 3\n"; err != nil || string(data) != want {
		t.Errorf("Marshal = %q, %v; want %q", data, err, want)
	}
	if data, _ := yaml.Marshal(Status{}); string(data) != "kind: Pending\n" {
		t.Errorf("Marshal(zero) = %q", data)
	}
	var got Status
	if err := yaml.Unmarshal([]byte("id: 4\n"), &got); err != nil || got.Kind != StatusKindPending || got.ID != 4 {
		t.Errorf("missing kind: %+v, %v", got, err)
	}
	for _, bad := range []string{"kind: Bogus", "kind: [Done]", "kind: 2"} {
		if err := yaml.Unmarshal([]byte(bad), &got); !errors.Is(err, ErrUnknownStatusKind) {
			t.Errorf("Unmarshal(%q) error = %v", bad, err)
		}
	}
}

func TestStatusAge(t *testing.T) {
	cases := map[time.Duration]string{
		-time.Second:             "0s",
		0:                        "0ms",
		999 * time.Millisecond:   "999ms",
		time.Second:              "1s",
		59 * time.Second:         "59s",
		time.Minute:              "1m",
		59 * time.Minute:         "59m",
		time.Hour:                "1h",
		23 * time.Hour:           "23h",
		24 * time.Hour:           "1d",
		1000 * 24 * time.Hour:    "1000d",
		time.Duration(1<<63 - 1): "106751d",
	}
	for d, want := range cases {
		if got := statusAge(d); got != want {
			t.Errorf("statusAge(%v) = %q, want %q", d, got, want)
		}
	}
}

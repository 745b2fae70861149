package reconciler

import (
	"encoding/json"
	"time"
)

// The status snapshot's durations marshal as Go duration strings
// ("26.9ms"), not as bare nanosecond integers that a reader has to know
// the unit of. Each type below marshals through an alias whose duration
// fields are shadowed by strings.

// durationString is a time.Duration that marshals as its String.
type durationString time.Duration

func (d durationString) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// MarshalJSON writes the snapshot with OldestWaiting as a duration string.
func (s StatusSnapshot) MarshalJSON() ([]byte, error) {
	type plain StatusSnapshot
	return json.Marshal(struct {
		plain
		OldestWaiting durationString `json:"oldest-waiting"`
	}{plain(s), durationString(s.OldestWaiting)})
}

// MarshalJSON writes the round with its duration as a string.
func (r RoundInfo) MarshalJSON() ([]byte, error) {
	type plain RoundInfo
	return json.Marshal(struct {
		plain
		Duration durationString `json:"duration"`
	}{plain(r), durationString(r.Duration)})
}

// MarshalJSON writes the full reconciliation with its duration as a
// string.
func (f FullInfo) MarshalJSON() ([]byte, error) {
	type plain FullInfo
	return json.Marshal(struct {
		plain
		Duration durationString `json:"duration"`
	}{plain(f), durationString(f.Duration)})
}

// MarshalJSON writes the quantiles as duration strings.
func (r RealizationInfo) MarshalJSON() ([]byte, error) {
	type plain RealizationInfo
	return json.Marshal(struct {
		plain
		P50 durationString `json:"p50"`
		P99 durationString `json:"p99"`
	}{plain(r), durationString(r.P50), durationString(r.P99)})
}

// UnmarshalJSON reads a duration string, or (as written before durations
// were strings) a number of nanoseconds.
func (d *durationString) UnmarshalJSON(data []byte) error {
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		var ns int64
		if err := json.Unmarshal(data, &ns); err != nil {
			return err
		}
		*d = durationString(ns)
		return nil
	}
	v, err := time.ParseDuration(s)
	*d = durationString(v)
	return err
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *StatusSnapshot) UnmarshalJSON(data []byte) error {
	type plain StatusSnapshot
	aux := struct {
		*plain
		OldestWaiting durationString `json:"oldest-waiting"`
	}{plain: (*plain)(s)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	s.OldestWaiting = time.Duration(aux.OldestWaiting)
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *RoundInfo) UnmarshalJSON(data []byte) error {
	type plain RoundInfo
	aux := struct {
		*plain
		Duration durationString `json:"duration"`
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	r.Duration = time.Duration(aux.Duration)
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (f *FullInfo) UnmarshalJSON(data []byte) error {
	type plain FullInfo
	aux := struct {
		*plain
		Duration durationString `json:"duration"`
	}{plain: (*plain)(f)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	f.Duration = time.Duration(aux.Duration)
	return nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *RealizationInfo) UnmarshalJSON(data []byte) error {
	type plain RealizationInfo
	aux := struct {
		*plain
		P50 durationString `json:"p50"`
		P99 durationString `json:"p99"`
	}{plain: (*plain)(r)}
	if err := json.Unmarshal(data, &aux); err != nil {
		return err
	}
	r.P50, r.P99 = time.Duration(aux.P50), time.Duration(aux.P99)
	return nil
}

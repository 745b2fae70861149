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

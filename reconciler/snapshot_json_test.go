package reconciler

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestSnapshotJSONDurations: durations in the /status JSON are strings a
// person can read, not nanosecond integers.
func TestSnapshotJSONDurations(t *testing.T) {
	s := StatusSnapshot{
		OldestWaiting: 1500 * time.Millisecond,
		LastRound:     RoundInfo{Objects: 3, Duration: 26941504},
		LastFull:      FullInfo{Duration: 2 * time.Second, Error: "x"},
		Realization:   RealizationInfo{Samples: 2, P50: time.Millisecond, P99: 3 * time.Millisecond},
	}
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"oldest-waiting":"1.5s"`, `"duration":"26.941504ms"`, `"duration":"2s"`,
		`"p50":"1ms"`, `"p99":"3ms"`, `"objects":3`, `"error":"x"`, `"samples":2`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("JSON lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(string(out), "26941504") {
		t.Errorf("a duration is still a bare integer:\n%s", out)
	}
	var back StatusSnapshot
	if err := json.Unmarshal(out, &back); err != nil {
		t.Fatal(err)
	}
	if back.OldestWaiting != s.OldestWaiting || back.LastRound != s.LastRound || back.LastFull != s.LastFull || back.Realization != s.Realization {
		t.Errorf("round trip: %+v, want %+v", back, s)
	}
}

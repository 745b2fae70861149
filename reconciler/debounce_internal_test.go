package reconciler

import (
	"testing"
	"time"
)

// TestDebounceReadEvery: while a Sync waits, changes are read at most every
// tenth of the debounce's interval, never less often than every 10ms, so
// that a quiet deadline moves by at most that much.
func TestDebounceReadEvery(t *testing.T) {
	for _, tc := range []struct {
		d    Debounce
		want time.Duration
	}{
		{Debounce{}.withDefaults(), maxReadEvery},
		{Trailing(50*time.Millisecond, time.Second), 5 * time.Millisecond},
		{Trailing(0, time.Second), 0},
		{LeadingEdge(20 * time.Millisecond), 2 * time.Millisecond},
		{LeadingEdge(time.Minute), maxReadEvery},
	} {
		if got := tc.d.readEvery(); got != tc.want {
			t.Errorf("%+v.readEvery() = %s, want %s", tc.d, got, tc.want)
		}
	}
}

package reconciler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// Row is String without the age: the same text however old the status.
func TestStatusRowHasNoAge(t *testing.T) {
	old := time.Now().Add(-time.Hour)
	for _, c := range []struct {
		status reconciler.Status
		want   string
	}{
		{reconciler.StatusPending(), "Pending"},
		{reconciler.StatusDone(), "Done"},
		{reconciler.Status{Kind: reconciler.StatusKindDone, UpdatedAt: old}, "Done"},
		{reconciler.StatusRefreshing(), "Refreshing"},
		{reconciler.StatusError(errors.New("connection refused")), "Error: connection refused"},
		{reconciler.Status{Kind: reconciler.StatusKindError, UpdatedAt: old, Error: "boom"}, "Error: boom"},
		{reconciler.Status{Kind: 9}, "StatusKind(9)"},
		{reconciler.Status{}, "Pending"},
	} {
		if got := c.status.Row(); got != c.want {
			t.Errorf("%+v.Row() = %q, want %q", c.status, got, c.want)
		}
		// String says the same, plus the age when UpdatedAt is set.
		if s := c.status.String(); len(s) < len(c.want) || s[:len(c.want)] != c.want {
			t.Errorf("%+v: String() = %q does not start with Row() %q", c.status, s, c.want)
		}
	}
}

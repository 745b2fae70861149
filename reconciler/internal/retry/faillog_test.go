package retry

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestFailureLog: the first failure of an object and every change of its
// error are logged at once, a repeat at most once per failureLogRepeat,
// and a flood is capped with the suppressed lines counted.
func TestFailureLog(t *testing.T) {
	var buf bytes.Buffer
	fl := NewFailureLog(slog.New(slog.NewTextHandler(&buf, nil)))
	now := time.Unix(1000, 0)
	var lastErr string
	var lastAt time.Time
	lines := func() int { return strings.Count(buf.String(), "Operation failed") }

	fl.Write(&lastErr, &lastAt, "k", "update", "refused", 1, now)
	fl.Write(&lastErr, &lastAt, "k", "update", "refused", 2, now.Add(time.Second))
	if got := lines(); got != 1 {
		t.Fatalf("%d lines after a failure and its repeat a second later, want 1", got)
	}
	fl.Write(&lastErr, &lastAt, "k", "update", "timeout", 3, now.Add(2*time.Second))
	if got := lines(); got != 2 {
		t.Fatalf("%d lines after the error changed, want 2", got)
	}
	fl.Write(&lastErr, &lastAt, "k", "update", "timeout", 4, now.Add(2*time.Second+failureLogRepeat))
	if got := lines(); got != 3 {
		t.Fatalf("%d lines after the same error a minute later, want 3", got)
	}
	if !strings.Contains(buf.String(), "key=k") || !strings.Contains(buf.String(), "op=update") {
		t.Errorf("lines lack the key or the op:\n%s", buf.String())
	}

	// A flood: 100k objects failing in the same second.
	buf.Reset()
	flood := now.Add(time.Hour)
	for i := range 100_000 {
		var e string
		var at time.Time
		fl.Write(&e, &at, fmt.Sprint(i), "update", "refused", 1, flood)
	}
	if got := lines(); got > failureLogBurst+failureLogRate {
		t.Fatalf("%d lines for 100k failures in one second, want at most %d", got, failureLogBurst+failureLogRate)
	}
	var e string
	var at time.Time
	fl.Write(&e, &at, "late", "update", "refused", 1, flood.Add(time.Second))
	if !strings.Contains(buf.String(), "suppressed=") {
		t.Errorf("the next line does not count the suppressed ones:\n%s", buf.String()[max(0, buf.Len()-300):])
	}
}

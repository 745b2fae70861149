package health

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"

	"github.com/converge-go/converge/reconciler/internal/clock"
)

// recorder is a cell.Health that keeps the last report.
type recorder struct {
	cell.Health
	level, msg string
	err        error
	reports    int
}

func (r *recorder) OK(msg string) { r.level, r.msg, r.err = "OK", msg, nil; r.reports++ }
func (r *recorder) Degraded(msg string, err error) {
	r.level, r.msg, r.err = "Degraded", msg, err
	r.reports++
}

// TestReportDegradedThenOK: failing objects give a Degraded report with
// the first errors by key and the count of the rest; none, OK with the
// object count; a report that would repeat the last is not made.
func TestReportDegradedThenOK(t *testing.T) {
	var later clock.Timer
	defer later.Close()
	h, rec, now := New(), &recorder{}, time.Unix(1000, 0)
	failing := map[string]string{}
	for i := range 15 {
		failing[fmt.Sprintf("k%02d", i)] = "boom"
	}
	first := func(n int) []error {
		return FirstErrors(n, func(yield func(string, string) bool) {
			for k, e := range failing {
				if !yield(k, e) {
					return
				}
			}
		})
	}
	h.Report(rec, now, 20, false, Whole{Op: "prune", Err: errors.New("no")}, &later, Failing{N: 15, First: first})
	if rec.level != "Degraded" || rec.msg != "15 object(s) failing, prune failed" ||
		!strings.HasPrefix(rec.err.Error(), "prune: no\nk00: boom") || !strings.HasSuffix(rec.err.Error(), "k09: boom\nand 5 more") {
		t.Fatalf("report %s %q: %v", rec.level, rec.msg, rec.err)
	}
	h.Report(rec, now, 20, false, Whole{}, &later, Failing{})
	h.Report(rec, now, 20, false, Whole{}, &later, Failing{})
	if rec.level != "OK" || rec.msg != "OK, 20 object(s)" || rec.reports != 2 {
		t.Fatalf("report %s %q after %d reports, want one OK", rec.level, rec.msg, rec.reports)
	}
	h.Report(rec, now, 20, true, Whole{}, &later, Failing{})
	if rec.msg != "Suspended, 20 object(s)" {
		t.Fatalf("suspended: %q", rec.msg)
	}
}

// TestRecentNewestFirst: the recent failures list newest first, at most
// MaxRecent, keys made printable.
func TestRecentNewestFirst(t *testing.T) {
	var r Recent
	for i := range MaxRecent + 3 {
		r.Add(Failure{Key: fmt.Sprint(i), Err: "e"})
	}
	r.Add(Failure{Key: "\x00\x01", Err: "bin"})
	l := r.List()
	if len(l) != MaxRecent || l[0].Key != "0001" || l[1].Key != fmt.Sprint(MaxRecent+2) {
		t.Fatalf("recent %v", l)
	}
}

package lineartest

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a testing.TB that records a failure instead of ending the
// test.
type recorder struct {
	testing.TB
	failed bool
}

func (r *recorder) Fatalf(string, ...any) { r.failed = true }
func (r *recorder) Logf(string, ...any)   {}

// sink keeps the compiler from dropping the work.
var sink int

// Check accepts linear work and refuses quadratic work.
func TestCheckTellsLinearFromQuadratic(t *testing.T) {
	linear := func(s string) { sink += strings.Count(s, "b") }
	quadratic := func(s string) {
		for i := range len(s) {
			sink += strings.Count(s[i:], "b")
		}
	}
	gen := func(n int) string { return strings.Repeat("a", n) }
	if r := (&recorder{TB: t}); func() bool { Check(r, 1<<20, gen, linear); return r.failed }() {
		t.Error("linear work refused")
	}
	if r := (&recorder{TB: t}); !func() bool { Check(r, 4<<10, gen, quadratic); return r.failed }() {
		t.Error("quadratic work accepted")
	}
}

// Package lineartest checks that a function takes time linear in its
// input, without asserting any time: it compares the time per byte of an
// input of size n with that of one of size 4n (the input doubled twice).
// Linear work gives about 1, quadratic work 4; Check fails above 2.
//
// Wall-clock times on a shared machine are noisy, so each size is timed
// several times, interleaved with the other size (both see the same
// load), after a garbage collection, and the least time of each is
// compared; a failing comparison is measured again a few times before the
// check fails.
package lineartest

import (
	"runtime"
	"testing"
	"time"
)

// Bound is the largest ratio of the time per byte at 4n to that at n
// that Check accepts.
const Bound = 2.0

const (
	trials   = 5 // timings of each size per attempt
	attempts = 4 // attempts before failing
)

// Check fails t when run takes more than Bound times as long per byte on
// gen(4*n) as on gen(n). It skips in -short mode.
func Check[T ~string | ~[]byte](t testing.TB, n int, gen func(n int) T, run func(T)) {
	t.Helper()
	if testing.Short() {
		t.Skip("timing")
	}
	small, large := gen(n), gen(4*n)
	var ratio float64
	for range attempts {
		s, l := time.Duration(1<<62), time.Duration(1<<62)
		for range trials {
			s = min(s, timed(run, small))
			l = min(l, timed(run, large))
		}
		ratio = (float64(l) / float64(len(large))) / (float64(s) / float64(len(small)))
		t.Logf("%d bytes: %v, %d bytes: %v; time per byte ×%.2f", len(small), s, len(large), l, ratio)
		if ratio < Bound {
			return
		}
	}
	t.Fatalf("four times the input cost %.2f times as much per byte (linear: about 1, quadratic: 4)", ratio)
}

func timed[T any](run func(T), in T) time.Duration {
	runtime.GC()
	start := time.Now()
	run(in)
	return time.Since(start)
}

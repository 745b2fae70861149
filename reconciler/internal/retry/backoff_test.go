package retry

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestBackoffSaturates(t *testing.T) {
	b := NewBackoff(100*time.Millisecond, time.Minute)
	for _, failures := range []int{1, 2, 10, 11, 63, 64, 65, 1000, math.MaxInt} {
		d := b.Nominal(failures)
		if d <= 0 || d > time.Minute {
			t.Fatalf("nominal(%d) = %s, want within (0, 1m]", failures, d)
		}
		if failures >= 11 && d != time.Minute {
			t.Fatalf("nominal(%d) = %s, want the 1m cap", failures, d)
		}
	}
	if d := b.Nominal(1); d != 100*time.Millisecond {
		t.Fatalf("nominal(1) = %s, want the minimum", d)
	}
	if d := b.Nominal(4); d != 800*time.Millisecond {
		t.Fatalf("nominal(4) = %s, want 800ms", d)
	}

	// Extreme bounds do not overflow either.
	huge := NewBackoff(time.Duration(math.MaxInt64/3), time.Duration(math.MaxInt64))
	for _, failures := range []int{1, 2, 3, 64, math.MaxInt} {
		if d := huge.Nominal(failures); d <= 0 {
			t.Fatalf("huge nominal(%d) = %s overflowed", failures, d)
		}
		if d := huge.Delay(failures); d <= 0 {
			t.Fatalf("huge delay(%d) = %s overflowed", failures, d)
		}
	}
}

func TestBackoffEqualJitter(t *testing.T) {
	b := NewBackoff(time.Second, 8*time.Second)
	for _, r := range []func(int64) int64{
		func(int64) int64 { return 0 },
		func(n int64) int64 { return n - 1 },
		rand.Int64N,
	} {
		b.Rand = r
		for failures := 1; failures < 70; failures++ {
			nominal := b.Nominal(failures)
			if d := b.Delay(failures); d < nominal/2 || d > nominal {
				t.Fatalf("delay(%d) = %s, want within [%s, %s]", failures, d, nominal/2, nominal)
			}
		}
	}
}

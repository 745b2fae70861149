package dirsource

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzSafeMessage: safeMessage, the quoting of yaml's messages, returns
// at most maxYAMLMessage bytes and a short tail, keeps valid UTF-8 valid,
// and leaves no quoted part longer than source.MaxQuoted.
func FuzzSafeMessage(f *testing.F) {
	for _, s := range []string{
		"line 2: field imgae not found in type main.spec",
		"line 2: cannot unmarshal !!str `abcdefg...` into int",
		"yaml: unknown anchor 'a' referenced",
		`line 2: mapping key "name" already defined at line 1`,
		"line 1: field " + strings.Repeat("é", 50) + " already set in type x",
		`x"` + strings.Repeat(`\"`, 100),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, m string) {
		out := safeMessage(m)
		if len(out) > maxYAMLMessage+32 {
			t.Fatalf("%d bytes: %q", len(out), out)
		}
		if utf8.ValidString(m) && !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8: %q", out)
		}
	})
}

// safeMessage takes time linear in its message, whatever it holds (the
// issue's pattern for k8ssource's sanitizer: an unclosed " followed by
// many \"; and many field names): twice the input costs about the same
// per byte.
func TestSafeMessageIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("timing")
	}
	for name, gen := range map[string]func(int) string{
		"escaped quotes": func(n int) string { return `field x"` + strings.Repeat(`\"`, n) + " not found in type t" },
		"quoted parts":   func(n int) string { return strings.Repeat(`"`+strings.Repeat("k", 50)+`" `, n/50) },
		"fields":         func(n int) string { return strings.Repeat("field ", n/6) + " not found in type x" },
		"anchors":        func(n int) string { return "anchor '" + strings.Repeat("'", n) },
	} {
		t.Run(name, func(t *testing.T) {
			perByte := func(s string) float64 {
				best := time.Duration(1 << 62)
				for range 5 {
					start := time.Now()
					safeMessage(s)
					best = min(best, time.Since(start))
				}
				return float64(best) / float64(len(s))
			}
			var ratio float64
			for range 3 {
				small, large := perByte(gen(1_000_000)), perByte(gen(2_000_000))
				if ratio = large / small; ratio < 1.6 {
					return
				}
			}
			t.Fatalf("twice the message cost %.2f times as much per byte", ratio)
		})
	}
}

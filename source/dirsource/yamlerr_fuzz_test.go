package dirsource

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/converge-go/converge/internal/lineartest"
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
// many \"; and many field names): four times the input (doubled twice)
// costs about the same per byte: under 2×, where quadratic work gives 4×.
func TestSafeMessageIsLinear(t *testing.T) {
	for name, gen := range map[string]func(int) string{
		"escaped quotes": func(n int) string { return `field x"` + strings.Repeat(`\"`, n) + " not found in type t" },
		"quoted parts":   func(n int) string { return strings.Repeat(`"`+strings.Repeat("k", 50)+`" `, n/50) },
		"fields":         func(n int) string { return strings.Repeat("field ", n/6) + " not found in type x" },
		"anchors":        func(n int) string { return "anchor '" + strings.Repeat("'", n) },
	} {
		t.Run(name, func(t *testing.T) {
			lineartest.Check(t, 500_000, gen, func(s string) { safeMessage(s) })
		})
	}
}

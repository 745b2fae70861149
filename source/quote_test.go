package source_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/converge-go/converge/internal/lineartest"
	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/sourcetest"
)

// secret is a value that stands for a line of a file only root may read.
const secret = "root:$6$Hx1rOq2JfQYz0t4j$0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghij:19000:0:99999:7:::"

// leaks reports whether msg holds more than source.MaxQuoted bytes in a
// row of s.
func leaks(msg, s string) bool {
	for i := 0; i+source.MaxQuoted < len(s); i++ {
		if strings.Contains(msg, s[i:i+source.MaxQuoted+1]) {
			return true
		}
	}
	return false
}

func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"short", `"short"`},
		{strings.Repeat("a", 40), `"` + strings.Repeat("a", 40) + `"`},
		{strings.Repeat("a", 41), `"` + strings.Repeat("a", 40) + `"... (41 bytes)`},
		// A two-byte character across the 40th byte is left out whole.
		{strings.Repeat("a", 39) + "é" + "b", `"` + strings.Repeat("a", 39) + `"... (42 bytes)`},
		// Three bytes of U+2028 across the cut.
		{strings.Repeat("a", 38) + "\u2028" + "b", `"` + strings.Repeat("a", 38) + `"... (42 bytes)`},
		// Bytes that are not UTF-8 count one each.
		{strings.Repeat("\xff", 45), `"` + strings.Repeat(`\xff`, 40) + `"... (45 bytes)`},
	} {
		if got := source.Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestShortenQuoted(t *testing.T) {
	long := strings.Repeat("x", 100)
	for _, tc := range []struct{ in, want string }{
		{"no quotes", "no quotes"},
		{`key "short" fine`, `key "short" fine`},
		{`json: unknown field "` + long + `"`, `json: unknown field "` + long[:40] + `"... (100 bytes)`},
		{"value `" + long + "` bad", "value `" + long[:40] + "`... (100 bytes) bad"},
		// An escaped quote does not end the part.
		{`a "` + long + `\"` + long + `" b`, `a "` + long[:40] + `"... (201 bytes) b`},
		// JSON's \/ is not Go syntax: cut, never inside an escape.
		{`"` + strings.Repeat("y", 38) + `\/` + long + `"`, `"` + strings.Repeat("y", 38) + `"... (140 bytes)`},
		// An unbalanced quote mark quotes nothing.
		{`it's "` + long, `it's "` + long},
	} {
		if got := source.ShortenQuoted(tc.in); got != tc.want {
			t.Errorf("ShortenQuoted(%q)\n = %s\nwant %s", tc.in, got, tc.want)
		}
	}
}

// FuzzQuote: Quote shows a prefix of its input of at most MaxQuoted bytes
// that splits no character, and ShortenQuoted leaves no longer quoted part.
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "abc", secret, strings.Repeat("é", 30), strings.Repeat("\u2028", 20) + "\xff", "\"`\\"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		q := source.Quote(s)
		// A cut value is its quoted prefix, then "... (N bytes)"; the
		// prefix itself may hold `"...` (the value "..." does).
		shown := q
		if i := strings.LastIndex(q, `"... (`); i >= 0 && strings.HasSuffix(q, " bytes)") {
			shown = q[:i+1]
		}
		prefix, err := strconv.Unquote(shown)
		if err != nil {
			t.Fatalf("Quote(%q) = %s: %v", s, q, err)
		}
		if !strings.HasPrefix(s, prefix) || len(prefix) > source.MaxQuoted || (len(s) <= source.MaxQuoted && prefix != s) {
			t.Fatalf("Quote(%q) = %s", s, q)
		}
		if next := s[len(prefix):]; next != "" && !utf8.RuneStart(next[0]) && utf8.ValidString(s) {
			t.Fatalf("Quote(%q) = %s splits a character", s, q)
		}
		if got, want := source.ShortenQuoted("field "+strconv.Quote(s)), "field "+q; got != want {
			t.Fatalf("ShortenQuoted of a %%q part: %s, want %s", got, want)
		}
		raw := strings.ReplaceAll(s, "`", "")
		got := source.ShortenQuoted("v `" + raw + "`")
		inner, _, _ := strings.Cut(strings.TrimPrefix(got, "v `"), "`")
		if !strings.HasPrefix(raw, inner) || len(inner) > source.MaxQuoted {
			t.Fatalf("ShortenQuoted of a `...` part: %q", got)
		}
	})
}

// An item's error reaches Status (and health, which shows the same
// messages) with its quoted values cut; a primary key that is content (a
// manifest's name field, say) is cut too.
func TestItemErrorsQuoteShortPrefixes(t *testing.T) {
	st := sourcetest.NewStore[string]()
	st.Set("a", "bad "+secret)
	st.Set("b", "twice")
	_, src := oneSource(t, st, func(cfg *source.Config[string, *obj]) {
		cfg.Transform = func(key, v string) ([]*obj, error) {
			switch {
			case strings.HasPrefix(v, "bad"):
				return nil, fmt.Errorf("%w: value %q", errInjected, v)
			case v == "twice":
				return []*obj{{Key: secret, Owner: "s"}, {Key: secret, Owner: "s"}}, nil
			}
			return []*obj{{Key: key, Value: v, Owner: "s"}}, nil
		}
	})
	snap := waitStatus(t, src, "two failing", func(s source.StatusSnapshot) bool { return s.FailingCount == 2 })
	for _, e := range snap.Failing {
		if leaks(e.Error, secret) {
			t.Errorf("%s: %s", e.Key, e.Error)
		}
	}
	if msg := snap.Failing[0].Error; !strings.Contains(msg, `injected list failure: value "bad root:$6$`) || !strings.Contains(msg, fmt.Sprintf("(%d bytes)", len("bad "+secret))) {
		t.Errorf("a: %s", msg)
	}
	if msg := snap.Failing[1].Error; !strings.Contains(msg, "appears twice") || !strings.Contains(msg, fmt.Sprintf("(%d bytes)", len(secret))) {
		t.Errorf("b: %s", msg)
	}
}

// ShortenQuoted, and an item's error through it, take time linear in the
// message whatever it holds: an unclosed " followed by many \" (what made
// k8ssource's sanitizer quadratic), many long quoted parts, many quote
// marks. Four times the message (doubled twice) costs about the same per
// byte: under 2× what the message did, where quadratic work gives 4×.
func TestShortenQuotedIsLinear(t *testing.T) {
	for name, gen := range map[string]func(int) string{
		"unclosed, escaped quotes": func(n int) string { return `x"` + strings.Repeat(`\"`, n/2) },
		"long quoted parts":        func(n int) string { return strings.Repeat(`"`+strings.Repeat("k", 98)+`"`, n/100) },
		"quote marks":              func(n int) string { return strings.Repeat("`\"", n/2) },
	} {
		t.Run(name, func(t *testing.T) {
			lineartest.Check(t, 500_000, gen, func(s string) { source.ShortenQuoted(s) })
		})
	}
}

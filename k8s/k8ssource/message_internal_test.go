package k8ssource

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// Quote keeps at most MaxQuoted bytes of a value, never half a
// character.
func TestQuote(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"short", `"short"`},
		{strings.Repeat("a", 40), strconv.Quote(strings.Repeat("a", 40))},
		{strings.Repeat("a", 41), strconv.Quote(strings.Repeat("a", 40)) + "..."},
		// 13 three-byte characters are 39 bytes; the 14th would pass 40.
		{strings.Repeat("€", 20), strconv.Quote(strings.Repeat("€", 13)) + "..."},
	} {
		if got := Quote(tc.in); got != tc.want {
			t.Errorf("Quote(%q) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

// A condition message keeps a short prefix of every long quoted value,
// cuts the whole on a character boundary, and is valid UTF-8.
func TestSanitize(t *testing.T) {
	secret := "root:$6$" + strings.Repeat("x", 80) + ":19000:0:99999:7:::"
	msg := "strict decoding: unknown field " + strconv.Quote(secret) + " in " + strconv.Quote("spec")
	got := sanitize(msg)
	if strings.Contains(got, "19000") || !strings.Contains(got, `"spec"`) || !strings.Contains(got, `"root:$6$xxx`) {
		t.Fatalf("sanitize kept %q", got)
	}
	long := strings.Repeat("é", maxMessage) // 2 bytes each
	if got := sanitize(long); len(got) > maxMessage || !utf8.ValidString(got) || !strings.HasSuffix(got, "...") {
		t.Fatalf("long message: %d bytes, valid %v", len(got), utf8.ValidString(got))
	}
	if got := sanitize("bad \xff byte"); !utf8.ValidString(got) {
		t.Fatalf("invalid UTF-8 kept: %q", got)
	}
	if got := sanitize(`unterminated "quote`); got != `unterminated "quote` {
		t.Fatalf("unterminated quote: %q", got)
	}
}

// FuzzSanitize: whatever the message, the result is valid UTF-8, within
// maxMessage bytes, and carries no quoted string of more than MaxQuoted
// bytes of value.
func FuzzSanitize(f *testing.F) {
	f.Add(`a "b" c`)
	f.Add(`"` + strings.Repeat("€", 30) + `" and "\x00\u2028` + strings.Repeat("y", 50) + `"`)
	f.Add("\"\\\"")
	f.Add("\xff\"\xfe")
	f.Fuzz(func(t *testing.T, s string) {
		got := sanitize(s)
		if !utf8.ValidString(got) || len(got) > maxMessage {
			t.Fatalf("sanitize(%q) = %q", s, got)
		}
		for rest := got; ; {
			i := strings.IndexByte(rest, '"')
			if i < 0 {
				break
			}
			q, err := strconv.QuotedPrefix(rest[i:])
			if err != nil {
				rest = rest[i+1:]
				continue
			}
			if v, _ := strconv.Unquote(q); len(v) > MaxQuoted {
				t.Fatalf("sanitize(%q) kept the quoted %q", s, q)
			}
			rest = rest[i+len(q):]
		}
	})
}

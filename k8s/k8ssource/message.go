package k8ssource

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// A condition's message and an Event's note are readable by anyone who
// can read the object, and health by anyone who can reach it: neither
// may carry more than a short prefix of a value an error quotes (a
// file's contents, a secret a target echoed), nor be cut in the middle
// of a character.

// MaxQuoted is how many bytes of a quoted value Quote keeps, and what a
// condition message keeps of each quoted string in it.
const MaxQuoted = 40

// maxMessage bounds a condition's message: metav1.Condition allows 32768
// bytes.
const maxMessage = 4096

// Quote quotes s as %q does, cut to its first MaxQuoted bytes on a
// character boundary, with "..." after the closing quote when it was
// cut. Use it for values from a spec in the errors of a Transform or an
// operation.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(cutUTF8(s, MaxQuoted)) + "..."
}

// cutUTF8 returns the longest prefix of s of at most n bytes that does
// not end inside a character.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// sanitize makes an error message fit for a condition or an Event: each
// double-quoted string longer than MaxQuoted bytes is cut as Quote cuts
// it, invalid UTF-8 is replaced, and the whole is cut to maxMessage bytes
// on a character boundary, "..." marking the cut.
func sanitize(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, '"') >= 0 {
		s = shortenQuoted(s)
	}
	if len(s) > maxMessage {
		s = cutUTF8(s, maxMessage-3) + "..."
	}
	return s
}

// shortenQuoted cuts every Go-quoted string of s (as %q writes them)
// whose value is longer than MaxQuoted bytes. A '"' that does not start
// a valid quoted string is kept as it is.
func shortenQuoted(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for {
		i := strings.IndexByte(s, '"')
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		s = s[i:]
		q, err := strconv.QuotedPrefix(s)
		if err != nil {
			b.WriteByte('"')
			s = s[1:]
			continue
		}
		v, _ := strconv.Unquote(q) // QuotedPrefix vouched for it
		if len(v) > MaxQuoted {
			b.WriteString(Quote(v))
		} else {
			b.WriteString(q)
		}
		s = s[len(q):]
	}
}

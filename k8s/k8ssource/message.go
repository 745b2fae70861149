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
//
// The work is bounded too: a message is cut to maxInput bytes before
// anything else reads it, and what follows is linear in what is left,
// so that no object's error, whatever it quotes, costs the status
// writer's loop more than that of maxInput bytes of text.

// MaxQuoted is how many bytes of a quoted value Quote keeps, and what a
// condition message keeps of each quoted string in it.
const MaxQuoted = 40

// maxMessage bounds a condition's message: metav1.Condition allows 32768
// bytes.
const maxMessage = 4096

// maxInput is how much of an error message sanitize reads at all: the
// rest is dropped before it is looked at.
const maxInput = 16 << 10

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

// sanitize makes an error message fit for a condition or an Event: it
// reads the first maxInput bytes only; each double-quoted string longer
// than MaxQuoted bytes is cut as Quote cuts it, invalid UTF-8 is
// replaced, and the whole is cut to maxMessage bytes on a character
// boundary, "..." marking the cut. Its cost is linear in the bytes it
// reads.
func sanitize(s string) string {
	s = cutUTF8(s, maxInput)
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
//
// It reads each byte of s a bounded number of times. A scan from a '"'
// that fails at byte e has read escapes from the '"' on: every '"'
// before e was the second byte of an escape \", and a scan from it
// would read the same escapes and fail at e as well, so the next scan
// starts at e.
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
		n, v, long, ok := scanQuoted(s)
		switch {
		case !ok:
			b.WriteString(s[:n]) // n >= 1: the '"' itself at least
		case long:
			b.WriteString(strconv.Quote(cutUTF8(v, MaxQuoted)) + "...")
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
}

// scanQuoted reads the Go double-quoted string at the start of s (s[0]
// is '"'), as strconv.QuotedPrefix does. ok: it is n bytes long, v is
// the start of its value (more than MaxQuoted bytes of it when long).
// !ok: it is not valid, and the first byte at which it failed is n.
func scanQuoted(s string) (n int, v string, long, ok bool) {
	var buf []byte
	size := 0
	pos := 1
	for {
		if pos >= len(s) {
			return len(s), "", false, false
		}
		switch s[pos] {
		case '"':
			return pos + 1, string(buf), size > MaxQuoted, true
		case '\n':
			return pos, "", false, false
		}
		c, multibyte, tail, err := strconv.UnquoteChar(s[pos:], '"')
		if err != nil {
			return pos, "", false, false
		}
		w := 1
		if c >= utf8.RuneSelf && multibyte {
			w = utf8.RuneLen(c)
		}
		if size <= MaxQuoted+utf8.UTFMax {
			if w == 1 {
				buf = append(buf, byte(c))
			} else {
				buf = utf8.AppendRune(buf, c)
			}
		}
		size += w
		pos = len(s) - len(tail)
	}
}

// joinMessages joins msgs with "; " as far as maxInput bytes, all that
// sanitize would read of the result.
func joinMessages(msgs []string) string {
	var b strings.Builder
	for i, m := range msgs {
		if i > 0 {
			b.WriteString("; ")
		}
		if b.Len()+len(m) > maxInput {
			b.WriteString(cutUTF8(m, max(maxInput-b.Len(), 0)))
			break
		}
		b.WriteString(m)
	}
	return b.String()
}

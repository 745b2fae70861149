package source

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxQuoted is how many bytes of a key or a value an error quotes at
// most: enough to recognise which one it is, too few to carry a secret
// from a file only the agent can read into health, logs or an
// unauthenticated /healthz. Quote and ShortenQuoted cut to it.
const MaxQuoted = 40

// maxItemError bounds the whole message of an item's error, whatever it
// quotes: the last line of defence for a message that quotes content
// without quote marks.
const maxItemError = 1024

// Quote returns s quoted for an error message, in Go syntax (as %q
// does), cut to its first MaxQuoted bytes on a character boundary. A cut
// value ends in "..." and says how long it is:
//
//	"root:$6$Hx1rOq2JfQYz0t4j"
//	"first forty bytes of a longer value ...."... (1234 bytes)
//
// Use it wherever an error names a key or a value that came from
// outside: a manifest, an etcd value, a Kubernetes object.
func Quote(s string) string {
	if len(s) <= MaxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(cutString(s, MaxQuoted)) + fmt.Sprintf("... (%d bytes)", len(s))
}

// cutString returns the longest prefix of s of at most n bytes that does
// not end inside a UTF-8 character. Bytes that are not UTF-8 at all count
// as characters of their own.
func cutString(s string, n int) string {
	i := 0
	for i < len(s) {
		_, size := utf8.DecodeRuneInString(s[i:])
		if i+size > n {
			break
		}
		i += size
	}
	return s[:i]
}

// ShortenQuoted returns msg with every quoted part ("...", in Go or JSON
// syntax, or `...`) whose content is longer than MaxQuoted bytes cut as
// Quote cuts it. It is for messages written by others (a decoder that
// quotes a whole key); errors of one's own should use Quote.
func ShortenQuoted(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); {
		c := msg[i]
		if c != '"' && c != '`' {
			j := strings.IndexAny(msg[i:], "\"`")
			if j < 0 {
				j = len(msg) - i
			}
			b.WriteString(msg[i : i+j])
			i += j
			continue
		}
		end := closingQuote(msg, i)
		if end < 0 {
			// An unbalanced quote mark quotes nothing.
			b.WriteString(msg[i:])
			break
		}
		b.WriteString(shortenQuotedPart(msg[i : end+1]))
		i = end + 1
	}
	return b.String()
}

// closingQuote returns the index of the quote mark that closes the one at
// msg[open], or -1. Inside "...", a backslash escapes the next byte.
func closingQuote(msg string, open int) int {
	q := msg[open]
	for i := open + 1; i < len(msg); i++ {
		switch msg[i] {
		case '\\':
			if q == '"' {
				i++
			}
		case q:
			return i
		}
	}
	return -1
}

// shortenQuotedPart cuts one quoted part, quote marks included.
func shortenQuotedPart(part string) string {
	content := part[1 : len(part)-1]
	if len(content) <= MaxQuoted {
		return part
	}
	if part[0] == '"' {
		if s, err := strconv.Unquote(part); err == nil {
			return Quote(s)
		}
		// Not Go syntax (JSON's "\/", say): cut the escaped text, never
		// inside an escape sequence.
		cut := cutString(content, MaxQuoted)
		if k := strings.LastIndexByte(cut, '\\'); k >= 0 && k >= len(cut)-10 {
			cut = cut[:k]
		}
		return `"` + cut + `"` + fmt.Sprintf("... (%d bytes)", len(content))
	}
	return "`" + cutString(content, MaxQuoted) + "`" + fmt.Sprintf("... (%d bytes)", len(content))
}

// shortError is an item's error as the source reports it: its message
// with long quoted parts cut (ShortenQuoted) and bounded as a whole. It
// unwraps to the original error, for errors.Is, but never prints it.
type shortError struct {
	msg string
	err error
}

func (e *shortError) Error() string { return e.msg }
func (e *shortError) Unwrap() error { return e.err }

// shorten returns err with a message that quotes no more than a short
// prefix of any key or value (see shortError).
func shorten(err error) error {
	if err == nil {
		return nil
	}
	var se *shortError
	if errors.As(err, &se) && se == err {
		return err
	}
	msg := ShortenQuoted(err.Error())
	if len(msg) > maxItemError {
		msg = cutString(msg, maxItemError) + fmt.Sprintf("... (%d bytes)", len(msg))
	}
	return &shortError{msg: msg, err: err}
}

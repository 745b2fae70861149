package dirsource

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/converge-go/converge/source"
)

// maxYAMLMessage bounds one message of a yaml/v3 error, in bytes, after
// the parts it quotes are cut: the bound for a form safeMessage does not
// know.
const maxYAMLMessage = 200

// maxTypeErrors bounds the messages kept of a yaml.TypeError: one per
// field of a document could be thousands, each rewritten by safeMessage.
const maxTypeErrors = 10

// safeError returns err, an error of yaml/v3 (line fixed by fixLine),
// with messages that quote no more than a short prefix (about
// source.MaxQuoted bytes) of the document's keys, values, tags and
// anchors: the errors of a manifest go to health, which an agent may
// serve unauthenticated, and a manifest may be a symlink to a file only
// the agent can read. The original error is not kept: unwrapping it
// would print it whole.
func safeError(err error) error {
	var te *yaml.TypeError
	var le *lineError
	switch {
	case errors.As(err, &te):
		n := min(len(te.Errors), maxTypeErrors)
		out := make([]string, n, n+1)
		for i, m := range te.Errors[:n] {
			out[i] = safeMessage(m)
		}
		if more := len(te.Errors) - n; more > 0 {
			out = append(out, fmt.Sprintf("and %d more", more))
		}
		return &yaml.TypeError{Errors: out}
	case errors.As(err, &le):
		// A syntax error: the scanner's and parser's messages are fixed
		// texts, but cut it all the same.
		return &lineError{line: le.line, msg: safeMessage(le.msg), err: errors.New(safeMessage(le.err.Error()))}
	}
	return errors.New(safeMessage(err.Error()))
}

// safeMessage cuts what one yaml/v3 message quotes. It knows the forms
// that quote the document without quote marks (a field name, a tag, an
// anchor); quoted parts ("...", `...`) are cut by source.ShortenQuoted,
// and the whole is bounded by maxYAMLMessage.
func safeMessage(m string) string {
	for _, tail := range []string{" not found in type ", " already set in type "} {
		// "line 2: field imgae not found in type main.spec"
		if i, j := strings.Index(m, "field "), strings.LastIndex(m, tail); i >= 0 && j > i+6 {
			m = m[:i+6] + short(m[i+6:j]) + m[j:]
		}
	}
	if i, j := strings.Index(m, "cannot unmarshal "), strings.LastIndex(m, " into "); i >= 0 && j > i+17 {
		// "line 2: cannot unmarshal !!str `abcdefg...` into int": yaml
		// keeps 7 bytes of the value, and cuts inside a character.
		m = m[:i+17] + unmarshalSubject(m[i+17:j]) + m[j:]
	}
	for _, head := range []string{"unknown anchor '", "anchor '"} {
		// "yaml: unknown anchor 'a' referenced"
		if i, j := strings.Index(m, head), strings.LastIndex(m, "'"); i >= 0 && j > i+len(head) {
			m = m[:i+len(head)] + short(m[i+len(head):j]) + m[j:]
			break
		}
	}
	m = source.ShortenQuoted(m)
	if len(m) > maxYAMLMessage {
		cut := m[:maxYAMLMessage]
		for !utf8.ValidString(cut) && len(cut) > maxYAMLMessage-utf8.UTFMax {
			cut = cut[:len(cut)-1]
		}
		m = fmt.Sprintf("%s... (%d bytes)", cut, len(m))
	}
	return m
}

// short returns s as it is if it is short, else its quoted prefix
// (source.Quote).
func short(s string) string {
	if len(s) <= source.MaxQuoted {
		return s
	}
	return source.Quote(s)
}

// unmarshalSubject fixes the "TAG `VALUE`" of a "cannot unmarshal"
// message: the tag cut, the value's partial character dropped.
func unmarshalSubject(s string) string {
	tag, value, quoted := strings.Cut(s, " `")
	if !quoted || !strings.HasSuffix(value, "`") {
		return short(s)
	}
	value = strings.TrimSuffix(value, "`")
	dots := strings.HasSuffix(value, "...")
	value = strings.TrimSuffix(value, "...")
	for i := 0; i < utf8.UTFMax-1 && value != "" && !utf8.ValidString(value); i++ {
		value = value[:len(value)-1]
	}
	if dots {
		value += "..."
	}
	return short(tag) + " `" + value + "`"
}

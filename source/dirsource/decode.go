package dirsource

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// DecodeOption changes how DecodeYAML decodes.
type DecodeOption func(*decodeOptions)

type decodeOptions struct{ lenient bool }

// Lenient makes DecodeYAML ignore fields that T does not have, as
// yaml.Unmarshal does. Without it, such a field (a misspelling: "imgae:")
// is an error naming the field and its line.
func Lenient() DecodeOption { return func(o *decodeOptions) { o.lenient = true } }

// DecodeYAML decodes every document of a YAML stream (JSON is YAML) into
// a T each, with go.yaml.in/yaml/v3 (the maintained fork of
// gopkg.in/yaml.v3): T's fields are matched by their `yaml:"..."` struct
// tags, or by their lowercased names when untagged; `json` tags are not
// read. Empty documents ("---" alone, or only comments) are skipped, so a
// file of comments yields no objects.
//
// Decoding is strict unless Lenient is given: a field T does not have,
// and a key repeated in one mapping, are errors. Errors carry the line,
// as "yaml: line 3: ..." for a syntax error or "line 3: field imgae not
// found in type ..." for a bad field, and say which document failed.
// They quote no more than a short prefix of any key, value, tag or anchor
// (see source.Quote), and hold at most ten of yaml's messages: a
// manifest's errors go to health.
//
// Decoding takes time linear in the size of data: each document is first
// read into a node tree and checked against MaxKeys, MaxNodes,
// MaxExpandedBytes and MaxKeyWork (errors wrap ErrTooComplex) before it is
// decoded into a T. Use it in Config.Decode, followed by
// checks of your own (quoting what they show with source.Quote).
func DecodeYAML[T any](data []byte, opts ...DecodeOption) ([]T, error) {
	var o decodeOptions
	for _, opt := range opts {
		opt(&o)
	}
	// Two decoders in step over the same stream: the first builds each
	// document's node tree (linear) and checks it, the second decodes the
	// document into a T only once it passed. (A node tree cannot be
	// decoded strictly: yaml.Node.Decode has no KnownFields.)
	trees := yaml.NewDecoder(bytes.NewReader(data))
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(!o.lenient)
	var out []T
	for i := 1; ; i++ {
		var tree yaml.Node
		err := trees.Decode(&tree)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err == nil {
			err = checkDocument(&tree)
			if err != nil {
				return nil, fmt.Errorf("document %d: %w", i, err)
			}
		}
		// A pointer stays nil for an empty document.
		var v *T
		if err == nil {
			err = dec.Decode(&v)
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, safeError(fixLine(err, data)))
		}
		if v != nil {
			out = append(out, *v)
		}
	}
}

// yamlLine matches a syntax error of yaml/v3, with or without a line.
var yamlLine = regexp.MustCompile(`^yaml: (?:line (\d+): )?(.*)$`)

// fixLine corrects the line of a yaml/v3 parser error: the parser (unlike
// its scanner) reports the zero-based line of the construct that failed,
// so "port: [5432" on line 2 came out as "line 1", and one on line 1 as no
// line at all. Any error's line is capped at the data's last line (an
// error at the end of the stream).
func fixLine(err error, data []byte) error {
	m := yamlLine.FindStringSubmatch(err.Error())
	if m == nil || (m[1] == "" && !parserError(m[2])) {
		return err
	}
	line := 0
	if m[1] != "" {
		line, _ = strconv.Atoi(m[1])
	}
	if parserError(m[2]) {
		line++
	}
	fixed := min(line, lines(data))
	if fixed == line && !parserError(m[2]) {
		return err
	}
	return &lineError{line: fixed, msg: m[2], err: err}
}

// lines counts data's lines as YAML does: \n, \r\n, \r, NEL, LS and PS
// break lines; a final break starts no line.
func lines(data []byte) int {
	n := 1
	s := string(data)
	for i := 0; i < len(s); i++ {
		switch {
		case s[i] == '\n':
		case s[i] == '\r':
			if i+1 < len(s) && s[i+1] == '\n' {
				i++
			}
		case strings.HasPrefix(s[i:], "\u0085"):
			i++
		case strings.HasPrefix(s[i:], "\u2028"), strings.HasPrefix(s[i:], "\u2029"):
			i += 2
		default:
			continue
		}
		if i+1 < len(s) {
			n++
		}
	}
	return n
}

// parserError reports whether msg is one of yaml/v3's parser errors (its
// scanner errors carry the right line).
func parserError(msg string) bool {
	for _, p := range []string{"did not find expected", "found undefined tag handle", "found duplicate %", "found incompatible YAML"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// lineError is a yaml/v3 error with its line corrected.
type lineError struct {
	line int
	msg  string
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("yaml: line %d: %s", e.line, e.msg) }
func (e *lineError) Unwrap() error { return e.err }

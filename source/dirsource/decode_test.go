package dirsource_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/converge-go/converge/source/dirsource"
)

type svc struct {
	Name  string `yaml:"name"`
	Port  int    `yaml:"port"`
	Image string `yaml:"image"`
}

// Findings 6 and 7: syntax errors name the line they are on; decoding is
// strict by default (an unknown field is an error naming it and its
// line), lenient on request.
func TestDecodeYAMLErrors(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       string // "" means no error
		opts       []dirsource.DecodeOption
	}{
		{"flow sequence on line 2", "name: db\nport: [5432\n", "yaml: line 2: did not find expected ',' or ']'", nil},
		{"flow sequence on line 1", "port: [5432\n", "yaml: line 1: ", nil},
		{"flow sequence at line 3", "name: db\nport: 1\nimage: [\n", "yaml: line 3: ", nil},
		{"bad indentation", "name: db\n  port: 1\n", "yaml: line 2: mapping values are not allowed", nil},
		{"unterminated string", "name: \"db\nport: 1\n", "yaml: line 2: found unexpected end of stream", nil},
		{"second document", "name: a\n---\nname: b\nport: [1\n", "document 2: yaml: line 4: ", nil},
		{"type error", "name: db\nport: x\n", "line 2: cannot unmarshal !!str `x` into int", nil},
		{"misspelled field", "name: db\nimgae: x\n", "line 2: field imgae not found in type dirsource_test.svc", nil},
		{"misspelled field in JSON", "{\"name\": \"db\",\n \"imgae\": \"x\"}", "line 2: field imgae not found", nil},
		{"misspelled field, lenient", "name: db\nimgae: x\n", "", []dirsource.DecodeOption{dirsource.Lenient()}},
		{"repeated key", "name: a\nname: b\n", `line 2: mapping key "name" already defined at line 1`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dirsource.DecodeYAML[svc]([]byte(tc.data), tc.opts...)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// Empty documents are skipped; comments alone are no object.
func TestDecodeYAMLDocuments(t *testing.T) {
	got, err := dirsource.DecodeYAML[svc]([]byte("---\n# c\n---\nname: a\n---\n---\nname: b\nport: 2\n"))
	want := []svc{{Name: "a"}, {Name: "b", Port: 2}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, %v; want %+v", got, err, want)
	}
	if got, err := dirsource.DecodeYAML[svc]([]byte("# only a comment\n")); err != nil || len(got) != 0 {
		t.Fatalf("comment only: %+v, %v", got, err)
	}
}

// FuzzDecodeYAML: any input decodes or fails without panicking; strict
// decoding accepts nothing lenient decoding rejects, and agrees with it
// when it accepts; a syntax error's line is within the input.
func FuzzDecodeYAML(f *testing.F) {
	for _, s := range []string{"name: db\nport: [5432\n", "name: a\n---\nname: b\n", "{\"name\": 1}", "imgae: x\n", "- a\n", "\t", "? [\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		strict, serr := dirsource.DecodeYAML[svc](data)
		lenient, lerr := dirsource.DecodeYAML[svc](data, dirsource.Lenient())
		if serr == nil && (lerr != nil || !reflect.DeepEqual(strict, lenient)) {
			t.Fatalf("strict %+v ok, lenient %+v %v", strict, lenient, lerr)
		}
		if lerr == nil {
			return
		}
		lines := 1 + strings.Count(strings.TrimSuffix(strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u0085", "\n", "\u2028", "\n", "\u2029", "\n").Replace(string(data)), "\n"), "\n")
		var line int
		if i := strings.Index(lerr.Error(), "yaml: line "); i >= 0 {
			if _, err := fmtSscan(lerr.Error()[i+len("yaml: line "):], &line); err == nil && (line < 1 || line > lines) {
				t.Fatalf("line %d of a %d-line input: %v", line, lines, lerr)
			}
		}
	})
}

func fmtSscan(s string, line *int) (int, error) { return fmt.Sscan(strings.SplitN(s, ":", 2)[0], line) }

package dirsource_test

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/converge-go/converge/source"
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
// when it accepts; an error is at most maxErrorBytes; a syntax error's
// line is within the input.
func FuzzDecodeYAML(f *testing.F) {
	for _, s := range []string{"name: db\nport: [5432\n", "name: a\n---\nname: b\n", "{\"name\": 1}", "imgae: x\n", "- a\n", "\t", "? [\n",
		// YAML's other line breaks: NEL, LS, PS.
		"name: a\u0085port: [1\u2028", "# c\u2028# d\u2029name: \"x\u0085y\"\nport: [", "\u2029\u2029\r\n\u0085: [\n",
		"name: \"\u2028\u2028\u2028\"\nport: !!int \u2029\n", "imgae\u2028: x\n",
		// Repeated keys, aliases, unknown fields.
		"a: 1\na: 2\n", "- &m {a: 1, b: 2}\n- *m\n- [*m, *m]\n", "a: &x [1, *x]\n", "x: 1\ny: 2\nz: 3\n<<: {name: a}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		strict, serr := dirsource.DecodeYAML[svc](data)
		lenient, lerr := dirsource.DecodeYAML[svc](data, dirsource.Lenient())
		if serr == nil && (lerr != nil || !reflect.DeepEqual(strict, lenient)) {
			t.Fatalf("strict %+v ok, lenient %+v %v", strict, lenient, lerr)
		}
		for _, err := range []error{serr, lerr} {
			if err != nil && len(err.Error()) > maxErrorBytes {
				t.Fatalf("a %d-byte error: %.300v", len(err.Error()), err)
			}
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

// maxErrorBytes bounds a decode error: ten messages of at most about 220
// bytes, "and N more", "document N: ".
const maxErrorBytes = 4096

func fmtSscan(s string, line *int) (int, error) { return fmt.Sscan(strings.SplitN(s, ":", 2)[0], line) }

// separatorManifest is a manifest of about n bytes full of YAML's other
// line breaks (U+0085, U+2028, U+2029), in a quoted value and in
// comments, with a syntax error at its end: the line fix-up used to
// convert the rest of the file to runes at each of them.
func separatorManifest(n int) []byte {
	var b strings.Builder
	b.WriteString("name: \"")
	for b.Len() < n/2 {
		b.WriteString("x\u0085y\u2028z\u2029")
	}
	b.WriteString("\"\n")
	for b.Len() < n {
		b.WriteString("#\u2028# \u0085#\u2029")
	}
	b.WriteString("\nport: [5432\n")
	return []byte(b.String())
}

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Decoding takes work linear in the manifest: a 1 MiB manifest full of
// line separators, with an error, costs about 16 times what a 64 KiB one
// does, not 256 times (the fix-up was quadratic: 10 minutes at 1 MiB).
// Work is measured as bytes allocated, which does not depend on the
// machine's load.
func TestDecodeYAMLIsLinear(t *testing.T) {
	small, large := separatorManifest(64<<10), separatorManifest(1<<20)
	var err error
	work := func(data []byte) uint64 {
		return allocated(func() { _, err = dirsource.DecodeYAML[svc](data) })
	}
	ws := work(small)
	if err == nil || !strings.Contains(err.Error(), "did not find expected") {
		t.Fatalf("64 KiB: %v, want a syntax error with its line", err)
	}
	wl := work(large)
	if err == nil {
		t.Fatal("1 MiB: no error")
	}
	ratio := float64(wl) / float64(ws)
	t.Logf("64 KiB: %d bytes allocated, 1 MiB: %d; ratio %.1f (linear 16, quadratic 256)", ws, wl, ratio)
	if ratio > 48 {
		t.Fatalf("decoding 16 times the input took %.0f times the work", ratio)
	}
}

// A decode error quotes no more than a short prefix of any key, value,
// tag or anchor of the manifest, and never splits a character: health
// shows it, and a manifest may be a link to a file only root can read.
func TestDecodeYAMLErrorsQuoteShortPrefixes(t *testing.T) {
	long := "root:$6$Hx1rOq2JfQYz0t4j$Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Lw0123456789abcdef:19000:0:99999:7:::"
	for _, tc := range []struct{ name, data, want string }{
		{"unknown field", "name: a\n" + long + ": 1\n", "not found in type"},
		{"unknown field, one line", long + ": 1\n", "not found in type"},
		{"repeated key", long + ": 1\n" + long + ": 2\n", "already defined at line 1"},
		{"type error", "port: \"" + long + "\"\n", "cannot unmarshal !!str `root:$6...` into int"},
		{"type error, character cut", "port: ééééééé\n", "cannot unmarshal !!str `ééé...` into int"},
		{"custom tag", "port: !" + strings.ReplaceAll(long, ":", "") + " 1\n", "cannot unmarshal \"!root$6$"},
		{"explicit tag", "port: !!int \"" + long + "\"\n", "cannot decode !!str `root:$6$"},
		{"unknown anchor", "name: *" + strings.NewReplacer(":", "", "$", "").Replace(long) + "\n", "unknown anchor"},
		{"invalid map key", "name: {[" + long + "]: 1}\n", ""},
		{"in a sequence", "- " + long + "\n", "cannot unmarshal !!seq into"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dirsource.DecodeYAML[svc]([]byte(tc.data))
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || !utf8.ValidString(msg) {
				t.Fatalf("%q, want one containing %q", msg, tc.want)
			}
			for i := 0; i+source.MaxQuoted < len(long); i++ {
				if strings.Contains(msg, long[i:i+source.MaxQuoted+1]) {
					t.Fatalf("%q quotes more than %d bytes of the manifest", msg, source.MaxQuoted)
				}
			}
		})
	}
}

package main

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/converge-go/converge/reconciler"
)

func TestParseRule(t *testing.T) {
	spec, err := parseRule("web", strings.NewReader(`{"protocol": "tcp", "port": 8000, "end_port": 8099, "comment": "dev servers"}`))
	if want := (RuleSpec{Name: "web", Protocol: "tcp", Port: 8000, EndPort: 8099, Comment: "dev servers"}); err != nil || spec != want {
		t.Fatalf("got %+v, %v; want %+v", spec, err, want)
	}
	for _, c := range []struct{ name, body, want string }{
		{"..", `{"protocol": "tcp", "port": 22}`, `name ".."`},
		{"a b", `{"protocol": "tcp", "port": 22}`, `name "a b"`},
		{strings.Repeat("n", 64), `{"protocol": "tcp", "port": 22}`, "1 to 63 letters"},
		{"x", ``, "empty body"},
		{"x", `{"protocol": `, "bad JSON"},
		{"x", `{"protocol": "tcp", "port": 22} {}`, "unexpected data after the object"},
		{"x", `{"protocol": "tcp", "ports": 22}`, `unknown field "ports"`},
		{"x", `{"port": 22}`, `"protocol" is missing`},
		{"x", `{"protocol": "tcp"}`, `"port" is missing`},
		{"x", `{"protocol": "tcp", "port": "22"}`, "bad JSON"},
		{"x", `{"protocol": "tcp", "port": 22.5}`, "bad JSON"},
		{"x", `{"protocol": "icmp", "port": 22}`, `protocol "icmp": want "tcp" or "udp"`},
		{"x", `{"protocol": "TCP", "port": 22}`, `protocol "TCP"`},
		{"x", `{"protocol": "tcp", "port": 0}`, "port 0: want 1 to 65535"},
		{"x", `{"protocol": "tcp", "port": 70000}`, "port 70000: want 1 to 65535"},
		{"x", `{"protocol": "tcp", "port": -1}`, "port -1"},
		{"x", `{"protocol": "tcp", "port": 80, "end_port": 80}`, "end_port 80: want a port above port (80)"},
		{"x", `{"protocol": "tcp", "port": 80, "end_port": 70}`, "end_port 70"},
		{"x", `{"protocol": "tcp", "port": 80, "end_port": 65536}`, "end_port 65536"},
		{"x", `{"protocol": "tcp", "port": 80, "comment": "say \"hi\""}`, `'"' is not allowed`},
		{"x", `{"protocol": "tcp", "port": 80, "comment": "two\nlines"}`, `'\n' is not allowed`},
		{"x", `{"protocol": "tcp", "port": 80, "comment": "` + strings.Repeat("c", MaxCommentSize+1) + `"}`, "comment of 257 bytes"},
	} {
		_, err := parseRule(c.name, strings.NewReader(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q %s: got %v, want an error containing %q", c.name, c.body, err, c.want)
		}
	}
}

func TestParseRuleTooLarge(t *testing.T) {
	big := `{"protocol": "tcp", "port": 1, "comment": "` + strings.Repeat("c", maxBodySize) + `"}`
	body := http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(big)), maxBodySize)
	if _, err := parseRule("x", body); !errors.Is(err, errTooLarge) {
		t.Fatalf("got %v, want errTooLarge", err)
	}
}

// FuzzParseRule checks that parseRule never panics, and that whatever it
// accepts is valid and renders into a well-formed ruleset.
func FuzzParseRule(f *testing.F) {
	f.Add("ssh", []byte(`{"protocol": "tcp", "port": 22, "comment": "ssh"}`))
	f.Add("web", []byte(`{"protocol": "tcp", "port": 8000, "end_port": 8099}`))
	f.Add("dns", []byte(`{"protocol": "udp", "port": 53, "comment": "\u00fc \\ $x {};#"}`))
	f.Add("x", []byte(`{"protocol": "tcp", "port": 70000}`))
	f.Add("x", []byte(`{"protocol": "tcp", "port": 1, "comment": "\"; flush ruleset"}`))
	f.Add("../x", []byte(`{}`))
	f.Add("x", []byte(`{"protocol": null, "port": null}`))
	f.Add("x", []byte(`[1, 2]`))
	f.Fuzz(func(t *testing.T, name string, body []byte) {
		spec, err := parseRule(name, strings.NewReader(string(body)))
		if err != nil {
			if err.Error() == "" {
				t.Fatal("an empty error message")
			}
			return
		}
		if err := spec.Validate(); err != nil {
			t.Fatalf("accepted %+v, which Validate rejects: %v", spec, err)
		}
		rs := render("drop", []*Rule{{RuleSpec: spec}})
		if _, got, err := parseRendered(rs); err != nil || len(got) != 1 || got[0] != spec {
			t.Fatalf("%+v renders into a ruleset that reads back as %+v, %v:\n%s", spec, got, err, rs.text)
		}
	})
}

// db/show and db/cmp print TableRow: its status has no age, so the same
// rule prints the same however long ago it was reconciled.
func TestTableRowHasNoAge(t *testing.T) {
	r := &Rule{RuleSpec: RuleSpec{Name: "ssh", Protocol: "tcp", Port: 22},
		Status: reconciler.Status{Kind: reconciler.StatusKindError, UpdatedAt: time.Now().Add(-time.Hour), Error: "boom"}}
	if got, want := strings.Join(r.TableRow(), "|"), "ssh|tcp|22||Error: boom"; got != want {
		t.Fatalf("TableRow = %q, want %q", got, want)
	}
}

package agentkit

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/converge-go/converge/internal/lineartest"
)

// body is a PUT body as the examples' APIs take them.
type body struct {
	Content *string `json:"content"`
	Mode    *string `json:"mode"`
}

func decode(data string) error {
	var b body
	r := httptest.NewRequest("PUT", "/x", strings.NewReader(data))
	return DecodeJSON(httptest.NewRecorder(), r, 64<<20, &b, `{"content": "..."}`)
}

// FuzzDecodeJSON: any body decodes or fails without panicking, and an
// error is a short message (it quotes at most an unknown field's name,
// to the caller who sent it).
func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"content": "x"}`, `{"content": "x", "content": "y"}`, `{"contents": 1}`, `{"mode": "0644"} {}`, ``, `[`, `{"content": "\ud800"}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		err := decode(data)
		if err != nil && len(err.Error()) > 200+len(data) {
			t.Fatalf("a %d-byte error for a %d-byte body", len(err.Error()), len(data))
		}
		if err != nil && utf8.ValidString(data) && !utf8.ValidString(err.Error()) {
			t.Fatalf("invalid UTF-8: %q", err)
		}
	})
}

// The APIs' JSON decoding takes time linear in the body, whatever it
// holds (issue 52 item 1 asked it of every decoder): a key repeated many
// times, many keys the type does not have (refused at the first), a long
// string of escaped quotes. Four times the body (doubled twice) costs
// about the same per byte: under 2×, where quadratic work gives 4×.
func TestDecodeJSONIsLinear(t *testing.T) {
	for name, gen := range map[string]func(int) string{
		"repeated key": func(n int) string { return "{" + strings.Repeat(`"content": "x", `, n/16) + `"mode": "0644"}` },
		"unknown keys": func(n int) string {
			var b strings.Builder
			b.WriteString("{")
			for i := 0; b.Len() < n; i++ {
				fmt.Fprintf(&b, `"k%07d": 1, `, i)
			}
			return b.String() + `"z": 1}`
		},
		"long string": func(n int) string { return `{"content": "` + strings.Repeat(`\"`, n/2) + `"}` },
	} {
		t.Run(name, func(t *testing.T) {
			lineartest.Check(t, 512<<10, gen, func(s string) { _ = decode(s) })
		})
	}
}

package reconciler_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/converge-go/converge/reconciler"
)

// TestConfigDocsAgree fails when docs/configuration.md's table and the
// doc comments of Config's fields in config.go disagree: a field missing
// from one of them, or a different default. A default is compared by its
// values (numbers and durations, in order) and a few words (required,
// none, module, false, forever), so "1000 rounds/s, burst 1" in the page
// matches "Default: 1000 rounds a second, burst 1" in the code. A field
// whose doc says no default and is not required must be shown with its
// zero value ("none", `""`, false, 0).
func TestConfigDocsAgree(t *testing.T) {
	readme, err := readmeDefaults("../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	code, err := codeDefaults("config.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, field := range code.order {
		got, ok := readme[field]
		if !ok {
			t.Errorf("Config.%s is not in docs/configuration.md's table", field)
			continue
		}
		want, sentence := documentedDefault(code.docs[field])
		if want == nil && code.oneOfRequired[field] != "" {
			want, sentence = []string{"required"}, code.oneOfRequired[field]
		}
		if want == nil {
			// No default stated: the zero value.
			if !slices.Contains([]string{"none", `""`, "false", "0"}, got) {
				t.Errorf("Config.%s: docs/configuration.md says the default is %q; config.go states none, so it is the zero value",
					field, got)
			}
			continue
		}
		if readmeValues := defaultValues(got); !slices.Equal(readmeValues, want) {
			t.Errorf("Config.%s: docs/configuration.md's default %q (%v) differs from config.go's %q (%v)",
				field, got, readmeValues, sentence, want)
		}
	}
	for field := range readme {
		if _, ok := code.docs[field]; !ok {
			t.Errorf("docs/configuration.md's table has %s, which is no field of Config", field)
		}
	}

	// The defaults that are constants: the page shows their values.
	short := func(d time.Duration) string { // "1m", not "1m0s"; "1h", not "1h0m0s"
		s := d.String()
		if strings.HasSuffix(s, "h0m0s") {
			return strings.TrimSuffix(s, "0m0s")
		}
		if strings.HasSuffix(s, "m0s") {
			return strings.TrimSuffix(s, "0s")
		}
		return s
	}
	for field, want := range map[string][]string{
		"RoundSize":                  {strconv.Itoa(reconciler.DefaultRoundSize)},
		"RoundRateLimiter":           {strconv.Itoa(reconciler.DefaultRoundRate), "1"},
		"Concurrency":                {strconv.Itoa(reconciler.DefaultConcurrency)},
		"RetryBackoffMin":            {short(reconciler.DefaultRetryBackoffMin), short(reconciler.DefaultRetryBackoffMax)},
		"FullReconciliationInterval": {short(reconciler.DefaultFullReconciliationInterval)},
		"RefreshInterval":            {short(reconciler.DefaultRefreshInterval)},
		"RefreshRateLimiter":         {strconv.Itoa(reconciler.DefaultRefreshRate), strconv.Itoa(reconciler.DefaultRefreshRate)},
	} {
		if got := defaultValues(readme[field]); !slices.Equal(got, want) {
			t.Errorf("Config.%s: docs/configuration.md's default %q (%v), but the code's constants say %v", field, readme[field], got, want)
		}
	}
}

// readmeDefaults returns the Default column of the table under "## Fields"
// in docs/configuration.md by field name. A row may name several fields ("`RetryBackoffMin`,
// `RetryBackoffMax`"): each gets the row's default.
func readmeDefaults(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, section, ok := strings.Cut(string(data), "\n## Fields\n")
	if !ok {
		return nil, fmt.Errorf(`%s has no "## Fields" section`, path)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	names := regexp.MustCompile("`([A-Z][A-Za-z]*)`")
	defaults := map[string]string{}
	for line := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue // not a row of the table, or its header
		}
		for _, m := range names.FindAllStringSubmatch(cells[1], -1) {
			defaults[m[1]] = strings.Trim(strings.TrimSpace(cells[2]), "`")
		}
	}
	if len(defaults) == 0 {
		return nil, fmt.Errorf("%s: no rows in the Configuration table", path)
	}
	return defaults, nil
}

// configDocs are the doc comments of Config's fields, in order.
type configDocs struct {
	order []string
	docs  map[string]string
	// oneOfRequired holds, for both X and Y, the sentence "Exactly one
	// of X and Y is required" found in any field's doc.
	oneOfRequired map[string]string
}

var oneOfRequired = regexp.MustCompile(`[Oo]ne of (\w+) and (\w+) is required`)

// codeDefaults returns the doc comment of every field of Config in the Go
// file at path. A field without a comment of its own shares the one of the
// field before it (RetryBackoffMax is documented with RetryBackoffMin).
func codeDefaults(path string) (configDocs, error) {
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return configDocs{}, err
	}
	out := configDocs{docs: map[string]string{}, oneOfRequired: map[string]string{}}
	ast.Inspect(file, func(n ast.Node) bool {
		spec, ok := n.(*ast.TypeSpec)
		if !ok || spec.Name.Name != "Config" {
			return true
		}
		prev := ""
		for _, field := range spec.Type.(*ast.StructType).Fields.List {
			doc := field.Doc.Text()
			if doc == "" {
				doc = prev
			}
			prev = doc
			doc = strings.Join(strings.Fields(doc), " ")
			for _, name := range field.Names {
				out.order = append(out.order, name.Name)
				out.docs[name.Name] = doc
			}
			for _, m := range oneOfRequired.FindAllStringSubmatch(doc, -1) {
				out.oneOfRequired[m[1]], out.oneOfRequired[m[2]] = m[0], m[0]
			}
		}
		return false
	})
	if len(out.order) == 0 {
		return configDocs{}, fmt.Errorf("%s: no Config struct", path)
	}
	return out, nil
}

// documentedDefault returns the values of the default a field's doc states
// and the sentence that states it: "Required." or "... is required." for a
// required field, else the sentence that starts with "Default". It returns
// nil when the doc states no default.
func documentedDefault(doc string) (values []string, sentence string) {
	for s := range strings.SplitSeq(doc, ". ") {
		s = strings.TrimSuffix(s, ".")
		switch {
		case s == "Required" || strings.HasSuffix(s, " is required"):
			return []string{"required"}, s
		case regexp.MustCompile(`^Defaults?\b`).MatchString(s):
			return defaultValues(s), s
		}
	}
	return nil, ""
}

// defaultValue matches what a default is made of: a number or a duration,
// or one of the words that stand for a value.
var defaultValue = regexp.MustCompile(`\b\d+(?:ns|µs|ms|s|m|h)?\b|\b(?:required|none|no \w+|module|false|forever)\b`)

// defaultValues returns the values a description of a default names, in
// order ("no timeout" counts as "none").
func defaultValues(s string) []string {
	var out []string
	for _, v := range defaultValue.FindAllString(s, -1) {
		if strings.HasPrefix(v, "no ") {
			v = "none"
		}
		out = append(out, v)
	}
	return out
}

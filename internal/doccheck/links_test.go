package doccheck

import (
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// repoFiles returns the files under the repository's root whose names
// end in suffix, relative to the root, leaving out .git.
func repoFiles(t *testing.T, suffix string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, suffix) {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLinks fails on every relative link or anchor of the repository's
// Markdown pages (the README, docs/, CONTRIBUTING.md, benchmarks/README.md
// and every other .md file) that does not resolve.
func TestLinks(t *testing.T) {
	pages := repoFiles(t, ".md")
	for _, must := range []string{"README.md", "CONTRIBUTING.md", "benchmarks/README.md", "docs/README.md"} {
		if !slices.Contains(pages, must) {
			t.Errorf("%s is missing", must)
		}
	}
	c := &Checker{Root: root}
	for _, page := range pages {
		problems, err := c.CheckPage(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
	}
}

// TestGoCommentLinks fails on a Markdown path named in a Go comment that
// does not exist, or an anchor its page lacks: a comment naming a page
// that moved is a bug.
func TestGoCommentLinks(t *testing.T) {
	c := &Checker{Root: root}
	for _, file := range repoFiles(t, ".go") {
		if filepath.Dir(file) == filepath.Join("internal", "doccheck") {
			continue // this package's own fixtures name pages that do not exist
		}
		problems, err := c.CheckGoFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range problems {
			t.Error(p)
		}
	}
}

// Every page of the guide is reachable from its index, and the README
// links the index.
func TestGuideIndexListsEveryPage(t *testing.T) {
	index, err := os.ReadFile(filepath.Join(root, "docs/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var linked []string
	for _, l := range Links(index) {
		linked = append(linked, l.Target)
	}
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if name := filepath.Base(p); name != "README.md" && !slices.Contains(linked, name) {
			t.Errorf("docs/README.md does not link %s", name)
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(Links(readme), func(l Link) bool { return l.Target == "docs/README.md" }) {
		t.Error("README.md does not link the guide's index, docs/README.md")
	}
}

func TestSlug(t *testing.T) {
	for heading, want := range map[string]string{
		"Quick start":                                 "quick-start",
		"Leader-only: `etcd/leader`":                  "leader-only-etcdleader",
		"6. Writing the table: the writer's contract": "6-writing-the-table-the-writers-contract",
		"Replicas (benchmarks/replicas)":              "replicas-benchmarksreplicas",
		"What is guaranteed, and what is not":         "what-is-guaranteed-and-what-is-not",
		"noop-1m":                                     "noop-1m",
		"snake_case **bold**":                         "snake_case-bold",
	} {
		if got := Slug(heading); got != want {
			t.Errorf("Slug(%q) = %q, want %q", heading, got, want)
		}
	}
}

func TestLinksAndAnchors(t *testing.T) {
	page := []byte("# Title\n" +
		"See [the guide](docs/README.md#top) and [`pkg`](pkg/) and ![img](a.png \"t\").\n" +
		"A code span `[not](a-link)` and a [nested [x] text](b.md).\n" +
		"```go\n" +
		"x := m[k](y) // [no](link)\n" +
		"## Not a heading\n" +
		"```\n" +
		"## Title\n" +
		"## Other `one`\n")
	var got []string
	for _, l := range Links(page) {
		got = append(got, l.Target)
	}
	if want := []string{"docs/README.md#top", "pkg/", "a.png", "b.md"}; !slices.Equal(got, want) {
		t.Errorf("Links = %q, want %q", got, want)
	}
	anchors := Anchors(page)
	for _, a := range []string{"title", "title-1", "other-one"} {
		if !anchors[a] {
			t.Errorf("no anchor %q in %v", a, anchors)
		}
	}
	if anchors["not-a-heading"] {
		t.Error("a heading inside a code block got an anchor")
	}
	blocks := Blocks(page)
	if len(blocks) != 1 || blocks[0].Info != "go" || blocks[0].Line != 5 || !strings.HasPrefix(blocks[0].Text, "x := m[k](y)") {
		t.Errorf("Blocks = %+v", blocks)
	}
}

func TestCommentPaths(t *testing.T) {
	src := []byte("// See docs/replicas.md#the-fencing-token and METRICS.md.\n" +
		"x := \"https://example.com/a.md\" // and ../../README.md\n" +
		"y := \"not/a/comment.md\"\n")
	var got []string
	for _, l := range CommentPaths(src) {
		got = append(got, l.Target)
	}
	if want := []string{"docs/replicas.md#the-fencing-token", "METRICS.md", "../../README.md"}; !slices.Equal(got, want) {
		t.Errorf("CommentPaths = %q, want %q", got, want)
	}
}

func TestCheckerFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n## Here\n[ok](b.md#b) [ok](#here) [ok](../x.go) [web](https://example.com/nowhere)\n"+
		"[gone](c.md) [bad anchor](b.md#nope) [own](#nope) [out](../../etc/passwd) [abs](/etc/passwd) [anchor in go](../x.go#L1)\n")
	write("docs/b.md", "# B\n")
	write("x.go", "package x\n// See docs/a.md#here, docs/a.md#gone and docs/missing.md.\n")
	c := &Checker{Root: dir}
	problems, err := c.CheckPage("docs/a.md")
	if err != nil {
		t.Fatal(err)
	}
	goProblems, err := c.CheckGoFile("x.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, p := range append(problems, goProblems...) {
		lines = append(lines, p.String())
	}
	want := []string{
		"docs/a.md:4: c.md: docs/c.md does not exist",
		"docs/a.md:4: b.md#nope: docs/b.md has no heading #nope",
		"docs/a.md:4: #nope: docs/a.md has no heading #nope",
		"docs/a.md:4: ../../etc/passwd: leaves the repository",
		"docs/a.md:4: /etc/passwd: an absolute path; links are relative to the page",
		"docs/a.md:4: ../x.go#L1: an anchor into x.go, which is not a Markdown page",
		"x.go:2: docs/a.md#gone: docs/a.md has no heading #gone",
		"x.go:2: docs/missing.md: docs/missing.md does not exist",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// FuzzMarkdown feeds arbitrary pages to the parsers: they must not panic,
// and what they return must be well formed.
func FuzzMarkdown(f *testing.F) {
	for _, seed := range []string{
		"# T\n[a](b.md#c)\n```\n[x](y)\n```\n",
		"[`x`](y) `[a](b)` ![i](j \"t\")\n## `H` *i*\n",
		"```go\nunclosed\n",
		"[[a]](b) [a](b c) []() [x](<y>)\n",
		"// see ../a.md#b and https://x/y.md\n",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, page string) {
		n := strings.Count(page, "\n") + 1
		for _, l := range append(Links([]byte(page)), CommentPaths([]byte(page))...) {
			if l.Line < 1 || l.Line > n || l.Target == "" || strings.ContainsFunc(l.Target, unicode.IsSpace) {
				t.Fatalf("bad link %+v in %q", l, page)
			}
		}
		for a := range Anchors([]byte(page)) {
			if strings.ContainsFunc(a, unicode.IsSpace) {
				t.Fatalf("anchor %q has a space", a)
			}
		}
		for _, b := range Blocks([]byte(page)) {
			if b.Line < 2 || !strings.Contains(page, b.Text) {
				t.Fatalf("bad block %+v in %q", b, page)
			}
		}
	})
}

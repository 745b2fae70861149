// Package doccheck checks converge's documentation against the
// repository it describes: every relative link and anchor in its Markdown
// pages resolves, every Markdown path a Go comment names exists, and the
// README's command blocks run as written (its tests do that). The package
// itself holds the small Markdown reading the checks share; it is
// internal, and nothing but its tests uses it.
package doccheck

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

// Link is one link of a page: its target as written ("docs/x.md#y",
// "#z", "https://...") and the line it is on, counted from 1.
type Link struct {
	Line   int
	Target string
}

// Block is one fenced code block of a page: its info string ("go", "sh",
// or empty), the line its first line of text is on, and its text with
// every line's newline.
type Block struct {
	Info string
	Line int
	Text string
}

// linkRE matches an inline link or image: [text](target) or
// [text](target "title"). The text may hold one level of brackets.
var linkRE = regexp.MustCompile(`!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)

// codeSpanRE matches an inline code span of single backticks.
var codeSpanRE = regexp.MustCompile("`[^`]*`")

// fence reports whether line opens or closes a fenced code block, and
// returns the info string after the fence.
func fence(line string) (info string, ok bool) {
	t := strings.TrimSpace(line)
	for _, f := range []string{"```", "~~~"} {
		if strings.HasPrefix(t, f) {
			return strings.TrimSpace(strings.TrimLeft(t, f[:1])), true
		}
	}
	return "", false
}

// lines calls fn with every line of page that is outside fenced code
// blocks, and its number.
func lines(page []byte, fn func(n int, line string)) {
	inFence := false
	for i, line := range strings.Split(string(page), "\n") {
		if _, ok := fence(line); ok {
			inFence = !inFence
			continue
		}
		if !inFence {
			fn(i+1, line)
		}
	}
}

// Links returns the inline links of a Markdown page, leaving out those in
// fenced code blocks and in code spans.
func Links(page []byte) []Link {
	var out []Link
	lines(page, func(n int, line string) {
		// A code span's text is code, not a link; blanking it keeps a
		// link whose text is a code span ([`x`](y)) intact.
		line = codeSpanRE.ReplaceAllStringFunc(line, func(s string) string { return strings.Repeat("x", len(s)) })
		for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
			if !strings.ContainsFunc(m[1], unicode.IsSpace) { // \s leaves out \v and Unicode spaces
				out = append(out, Link{Line: n, Target: m[1]})
			}
		}
	})
	return out
}

// headingRE matches an ATX heading and captures its text.
var headingRE = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)[ \t#]*$`)

// Anchors returns the anchors a page's headings get when it is rendered:
// each heading's Slug, with "-1", "-2", ... added to repeats, as GitHub
// does.
func Anchors(page []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines(page, func(_ int, line string) {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			return
		}
		slug := Slug(m[1])
		if n := seen[slug]; n > 0 {
			out[fmt.Sprintf("%s-%d", slug, n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	})
	return out
}

// Slug returns the anchor of a heading's text: lower case, letters,
// digits, marks, '_' and '-' kept, spaces turned into '-', everything else
// (punctuation, backticks, emphasis) dropped.
func Slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// Blocks returns the fenced code blocks of a page, in order. A block that
// is not closed runs to the end of the page.
func Blocks(page []byte) []Block {
	var out []Block
	var cur *Block
	for i, line := range bytes.SplitAfter(page, []byte("\n")) {
		info, isFence := fence(string(line))
		switch {
		case cur == nil && isFence:
			cur = &Block{Info: info, Line: i + 2}
		case cur != nil && isFence && info == "":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.Text += string(line)
		}
	}
	if cur != nil {
		out = append(out, *cur)
	}
	return out
}

// Section returns the part of page under the heading "## name" (up to
// the next heading of level 2 or 1), and whether there is one.
func Section(page []byte, name string) ([]byte, bool) {
	_, rest, ok := bytes.Cut(page, []byte("\n## "+name+"\n"))
	if !ok {
		return nil, false
	}
	end := len(rest)
	for _, next := range [][]byte{[]byte("\n## "), []byte("\n# ")} {
		if i := bytes.Index(rest, next); i >= 0 && i < end {
			end = i
		}
	}
	return rest[:end], true
}

// commentPathRE matches a Markdown file's path in a comment, with an
// optional anchor: "docs/replicas.md", "../README.md#quick-start".
var commentPathRE = regexp.MustCompile(`(?:\.\.?/)*[A-Za-z0-9_][A-Za-z0-9_./-]*\.md(?:#[A-Za-z0-9_-]+)?\b`)

// lineCommentRE finds a Go line comment: "//" that is not part of a URL's
// "://".
var lineCommentRE = regexp.MustCompile(`(?:^|[^:])//(.*)$`)

// CommentPaths returns the Markdown paths named in the line comments of
// a Go source file, each with its line.
func CommentPaths(src []byte) []Link {
	var out []Link
	for i, line := range strings.Split(string(src), "\n") {
		m := lineCommentRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, p := range commentPathRE.FindAllString(m[1], -1) {
			out = append(out, Link{Line: i + 1, Target: p})
		}
	}
	return out
}

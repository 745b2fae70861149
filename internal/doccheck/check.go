package doccheck

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// Problem is a link that does not resolve: the file it is in (relative
// to the repository), its line, and what is wrong.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string { return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg) }

// external reports whether a link target leaves the repository: a URL
// with a scheme, or a mail address. Those are not checked (no network).
func external(target string) bool {
	u, err := url.Parse(target)
	return err == nil && u.Scheme != ""
}

// Checker resolves links inside one repository, reading each Markdown
// file's anchors once.
type Checker struct {
	Root    string // the repository's root directory
	anchors map[string]map[string]bool
}

// CheckPage returns the problems of the links of the Markdown page at
// path, relative to Root: a target that is absolute, leaves the
// repository or does not exist, or an anchor that its page lacks.
func (c *Checker) CheckPage(path string) ([]Problem, error) {
	page, err := os.ReadFile(filepath.Join(c.Root, path))
	if err != nil {
		return nil, err
	}
	var out []Problem
	for _, l := range Links(page) {
		if external(l.Target) {
			continue
		}
		msg := ""
		if anchor, own := strings.CutPrefix(l.Target, "#"); own {
			msg = c.checkAnchor(l.Target, path, anchor)
		} else {
			msg = c.resolve(filepath.Dir(path), l.Target)
		}
		if msg != "" {
			out = append(out, Problem{File: path, Line: l.Line, Msg: msg})
		}
	}
	return out, nil
}

// CheckGoFile returns the problems of the Markdown paths named in the
// comments of the Go file at path, relative to Root. A path may be
// relative to the file's directory or to the repository's root.
func (c *Checker) CheckGoFile(path string) ([]Problem, error) {
	src, err := os.ReadFile(filepath.Join(c.Root, path))
	if err != nil {
		return nil, err
	}
	var out []Problem
	for _, l := range CommentPaths(src) {
		msg := c.resolve(filepath.Dir(path), l.Target)
		if msg != "" && !strings.HasPrefix(l.Target, ".") {
			if c.resolve(".", l.Target) == "" {
				msg = ""
			}
		}
		if msg != "" {
			out = append(out, Problem{File: path, Line: l.Line, Msg: msg})
		}
	}
	return out, nil
}

// resolve checks one target written in a file of directory dir (relative
// to Root) and returns what is wrong with it, or "".
func (c *Checker) resolve(dir, target string) string {
	pathPart, anchor, hasAnchor := strings.Cut(target, "#")
	if unescaped, err := url.PathUnescape(pathPart); err == nil {
		pathPart = unescaped
	}
	file := filepath.Join(dir, pathPart)
	switch {
	case filepath.IsAbs(pathPart):
		return fmt.Sprintf("%s: an absolute path; links are relative to the page", target)
	case file == ".." || strings.HasPrefix(file, ".."+string(filepath.Separator)):
		return fmt.Sprintf("%s: leaves the repository", target)
	}
	if _, err := os.Stat(filepath.Join(c.Root, file)); err != nil {
		return fmt.Sprintf("%s: %s does not exist", target, file)
	}
	if !hasAnchor {
		return ""
	}
	return c.checkAnchor(target, file, anchor)
}

// checkAnchor checks that the Markdown file (relative to Root) has the
// anchor.
func (c *Checker) checkAnchor(target, file, anchor string) string {
	if !strings.HasSuffix(file, ".md") {
		return fmt.Sprintf("%s: an anchor into %s, which is not a Markdown page", target, file)
	}
	if c.anchors == nil {
		c.anchors = map[string]map[string]bool{}
	}
	a, ok := c.anchors[file]
	if !ok {
		page, err := os.ReadFile(filepath.Join(c.Root, file))
		if err != nil {
			return fmt.Sprintf("%s: %v", target, err)
		}
		a = Anchors(page)
		c.anchors[file] = a
	}
	if !a[anchor] {
		return fmt.Sprintf("%s: %s has no heading #%s", target, file, anchor)
	}
	return ""
}

package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// guaranteesPage lists every promise of the docs with the tests that
// hold it.
const guaranteesPage = "docs/guarantees.md"

// testRef is how the page names a test: `dir/TestName`, or a script's
// path `dir/testdata/name.txtar`.
var testRef = regexp.MustCompile("`([a-z0-9_./-]+)/(Test[A-Za-z0-9_]+|[a-z0-9_-]+\\.txtar)`")

// TestGuaranteesNameRealTests fails when the guarantees page names a test
// that does not exist: a Go test function in the directory named, or a
// script file at the path named. It also fails when the page names none.
func TestGuaranteesNameRealTests(t *testing.T) {
	page, err := os.ReadFile(filepath.Join(root, guaranteesPage))
	if err != nil {
		t.Fatal(err)
	}
	refs := testRef.FindAllStringSubmatch(string(page), -1)
	if len(refs) < 50 {
		t.Fatalf("%s names %d tests: the pattern or the page is broken", guaranteesPage, len(refs))
	}
	defined := map[string]bool{} // dir/TestName
	for _, ref := range refs {
		dir, name := ref[1], ref[2]
		if strings.HasSuffix(name, ".txtar") {
			if _, err := os.Stat(filepath.Join(root, dir, name)); err != nil {
				t.Errorf("%s names the script %s/%s, which does not exist", guaranteesPage, dir, name)
			}
			continue
		}
		if !defined[dir+"/"+name] && !definesTest(t, filepath.Join(root, dir), name) {
			t.Errorf("%s names %s/%s: no such test in %s", guaranteesPage, dir, name, dir)
			continue
		}
		defined[dir+"/"+name] = true
	}
}

// definesTest reports whether a _test.go file of dir defines the test
// function name.
func definesTest(t *testing.T, dir, name string) bool {
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	decl := "func " + name + "(t *testing.T)"
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), decl) {
			return true
		}
	}
	return false
}

package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-go/converge/reconciler"
)

// A file in a directory depends on the directory's object. The file's
// Update does not create its directory, and the directory's Delete
// refuses a directory that is not empty, so a file written before its
// directory, or a directory removed before its file, would fail and be
// retried: these tests assert that no operation failed and nothing was
// retried, besides what is on disk at each step.

// dirManifest is a manifest that lists the file before its directory, so
// that the file is read first.
const dirManifest = `name: index.html
dir: site
content: hello
---
name: site
kind: dir
mode: "0750"
`

// TestDirectoryCreatedFirst: a file whose manifest comes before its
// directory's is written only once the directory exists; the directory
// gets its own mode.
func TestDirectoryCreatedFirst(t *testing.T) {
	a, manifests := startWithDirs(t)
	putManifest(t, manifests, "site.yaml", dirManifest)
	a.waitDone(t, "index.html")
	expectDir(t, filepath.Join(a.dir, "site"), 0o750)
	expectFile(t, filepath.Join(a.dir, "site", "index.html"), "hello")
	a.noFailures(t)
}

// TestDirectoryRemovedLast: a directory whose object is deleted while a
// file in it is still desired stays, its Delete Blocked by the file
// (Explain says so); once the file goes too, the file is removed and
// then the directory. Deleting both in one change removes them in that
// order too.
func TestDirectoryRemovedLast(t *testing.T) {
	a, manifests := startWithDirs(t)
	putManifest(t, manifests, "site.yaml", dirManifest)
	a.waitDone(t, "index.html")

	// The directory's object goes; its file stays desired.
	putManifest(t, manifests, "site.yaml", "name: index.html\ndir: site\ncontent: hello\n")
	e := a.waitExplain(t, "site", func(e reconciler.Explanation) bool { return e.State == reconciler.KeyBlocked })
	if !e.Deleted || !strings.Contains(e.Reason, "index.html") {
		t.Fatalf("the directory's Delete should wait for index.html: %+v", e)
	}
	a.Expect(t, "GET", "/explain/site", "", http.StatusOK, "index.html")
	expectFile(t, filepath.Join(a.dir, "site", "index.html"), "hello")

	if err := os.Remove(filepath.Join(manifests, "site.yaml")); err != nil {
		t.Fatal(err)
	}
	a.waitGone(t, "site")
	if _, err := os.Lstat(filepath.Join(a.dir, "site")); !os.IsNotExist(err) {
		t.Fatalf("the directory is still there: %v", err)
	}

	// Both in one manifest, deleted in one change.
	putManifest(t, manifests, "site.yaml", dirManifest)
	a.waitDone(t, "index.html")
	if err := os.Remove(filepath.Join(manifests, "site.yaml")); err != nil {
		t.Fatal(err)
	}
	a.waitGone(t, "site")
	a.waitGone(t, "index.html")
	a.noFailures(t)
}

// TestBlockedFile: a file whose directory object is missing is not
// attempted; Explain says what it waits for; the directory's object
// releases it.
func TestBlockedFile(t *testing.T) {
	a, manifests := startWithDirs(t)
	putManifest(t, manifests, "orphan.yaml", "name: orphan.txt\ndir: missing\ncontent: x\n")
	e := a.waitExplain(t, "orphan.txt", func(e reconciler.Explanation) bool { return e.State == reconciler.KeyBlocked })
	if e.Reason != "blocked on missing: not in the table" || e.Attempts != 0 || e.LastError != "" {
		t.Fatalf("explanation of the blocked file: %+v", e)
	}
	a.Expect(t, "GET", "/explain/orphan.txt", "", http.StatusOK, "blocked on missing: not in the table")
	if st := a.rec.Status(); st.Blocked != 1 {
		t.Fatalf("Status().Blocked = %d, want 1", st.Blocked)
	}
	if _, err := os.Lstat(filepath.Join(a.dir, "missing")); !os.IsNotExist(err) {
		t.Fatalf("something was created for the blocked file: %v", err)
	}

	putManifest(t, manifests, "missing.yaml", "name: missing\nkind: dir\n")
	a.waitDone(t, "orphan.txt")
	expectDir(t, filepath.Join(a.dir, "missing"), DefaultDirMode)
	expectFile(t, filepath.Join(a.dir, "missing", "orphan.txt"), "x")
	a.noFailures(t)
}

// startWithDirs starts the example with an empty manifests directory.
func startWithDirs(t *testing.T) (*agent, string) {
	t.Helper()
	root := t.TempDir()
	manifests := filepath.Join(root, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	a, _ := startWithManifests(t, root, manifests)
	return a, manifests
}

// waitDone waits until name's object is Done.
func (a *agent) waitDone(t *testing.T, name string) {
	t.Helper()
	a.waitExplain(t, name, func(e reconciler.Explanation) bool {
		return e.InTable && e.Status.Kind == reconciler.StatusKindDone
	})
}

// waitGone waits until name's Delete is done.
func (a *agent) waitGone(t *testing.T, name string) {
	t.Helper()
	a.waitExplain(t, name, func(e reconciler.Explanation) bool {
		return e.State == reconciler.KeyAbsent && e.Deleted
	})
}

// noFailures fails t if the reconciler's metrics count a failed operation
// or a retry.
func (a *agent) noFailures(t *testing.T) {
	t.Helper()
	body := a.Expect(t, "GET", "/metrics", "", http.StatusOK, `result="ok"`)
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		failed := strings.HasPrefix(line, "converge_reconciler_operations_total{") && !strings.Contains(line, `result="ok"`)
		retried := strings.HasPrefix(line, "converge_reconciler_retries_scheduled_total{")
		if (failed || retried) && !strings.HasSuffix(line, " 0") {
			t.Errorf("an operation failed or was retried: %s", line)
		}
	}
}

func expectDir(t *testing.T, path string, mode FileMode) {
	t.Helper()
	info, err := os.Lstat(path)
	if err != nil || !info.IsDir() || info.Mode().Perm() != fs.FileMode(mode) {
		t.Fatalf("%s: want a directory of mode %s: %v %v", path, mode, info, err)
	}
}

func expectFile(t *testing.T, path, content string) {
	t.Helper()
	have, err := os.ReadFile(path)
	if err != nil || string(have) != content {
		t.Fatalf("%s: %q, %v; want %q", path, have, err, content)
	}
}

// TestDirectoryDrift: a stray file dropped in a desired directory is
// pruned, the desired file in it kept; a directory chmod-ed behind the
// agent's back gets its mode back at its refresh.
func TestDirectoryDrift(t *testing.T) {
	a, manifests := startWithDirs(t)
	putManifest(t, manifests, "site.yaml", dirManifest)
	a.waitDone(t, "index.html")
	site := filepath.Join(a.dir, "site")
	stray := filepath.Join(site, "stray.txt")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(site, 0o700); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the stray pruned and the mode repaired", func() error {
		if _, err := os.Lstat(stray); !os.IsNotExist(err) {
			return fmt.Errorf("stray: %v", err)
		}
		info, err := os.Lstat(site)
		if err != nil || info.Mode().Perm() != 0o750 {
			return fmt.Errorf("site: %v %v", info, err)
		}
		return nil
	})
	expectFile(t, filepath.Join(site, "index.html"), "hello")
	a.noFailures(t)
}

package dirsource_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/dirsource"
)

const (
	aYAML  = "key: a1\nvalue: one\n---\nkey: a2\nvalue: two\n"
	aYAML2 = "key: a1\nvalue: uno\n---\nkey: a2\nvalue: two\n"
	bJSON  = `{"key": "b1", "value": "x"}`
)

// The first list loads every manifest (YAML with several documents, and
// JSON); other files are ignored; an edit renamed into place is one
// change, and only the object that changed is written.
func TestLoadAndEdit(t *testing.T) {
	f := start(t, func(dir string) {
		write(t, filepath.Join(dir, "a.yaml"), aYAML)
		write(t, filepath.Join(dir, "b.json"), bJSON)
		write(t, filepath.Join(dir, "notes.txt"), "key: n\n")
	}, nil)
	f.wait("a1=one@a.yaml a2=two@a.yaml b1=x@b.json")
	f.waitStatus("initialized with 2 files, 3 objects", func(s source.StatusSnapshot) bool {
		return s.Initialized && s.Items == 2 && s.Objects == 3
	})

	replace(t, filepath.Join(f.dir, "a.yaml"), aYAML2)
	f.wait("a1=uno@a.yaml a2=two@a.yaml b1=x@b.json")
	if w := f.writeCounts(); w["a1"] != 2 || w["a2"] != 1 || w["b1"] != 1 {
		t.Fatalf("writes %v: want a1 twice, a2 and b1 once", w)
	}
}

// A file that fails to decode keeps its objects, and health names the
// file, the line and the error; fixing it applies it.
func TestCorruptFileKeepsObjects(t *testing.T) {
	f := start(t, func(dir string) { write(t, filepath.Join(dir, "a.yaml"), aYAML) }, nil)
	f.wait("a1=one@a.yaml a2=two@a.yaml")
	write(t, filepath.Join(f.dir, "a.yaml"), "key: a1\nvalue: [unclosed\n")
	s := f.waitStatus("a.yaml failing", func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
	msg := s.HealthMessage()
	if !strings.Contains(msg, "a.yaml") || !strings.Contains(msg, "line ") {
		t.Fatalf("health %q does not name the file and line", msg)
	}
	f.wait("a1=one@a.yaml a2=two@a.yaml")

	replace(t, filepath.Join(f.dir, "a.yaml"), aYAML2)
	f.wait("a1=uno@a.yaml a2=two@a.yaml")
	f.waitStatus("healthy", source.StatusSnapshot.Healthy)
}

// A file truncated by its writer (empty, mid-write) keeps its objects and
// is applied once written.
func TestTruncatedFileIsRetried(t *testing.T) {
	f := start(t, func(dir string) { write(t, filepath.Join(dir, "a.yaml"), aYAML) }, nil)
	f.wait("a1=one@a.yaml a2=two@a.yaml")
	path := filepath.Join(f.dir, "a.yaml")
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	s := f.waitStatus("empty file reported", func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
	if !strings.Contains(s.Failing[0].Error, dirsource.ErrEmptyFile.Error()) {
		t.Fatalf("failing %+v, want ErrEmptyFile", s.Failing)
	}
	f.wait("a1=one@a.yaml a2=two@a.yaml")
	if _, err := fh.WriteString(aYAML2); err != nil {
		t.Fatal(err)
	}
	fh.Close()
	f.wait("a1=uno@a.yaml a2=two@a.yaml")
}

// A removed file deletes its objects, and only its own.
func TestRemovedFileDeletesObjects(t *testing.T) {
	f := start(t, func(dir string) {
		write(t, filepath.Join(dir, "a.yaml"), aYAML)
		write(t, filepath.Join(dir, "b.json"), bJSON)
	}, nil)
	f.wait("a1=one@a.yaml a2=two@a.yaml b1=x@b.json")
	if err := os.Remove(filepath.Join(f.dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	f.wait("b1=x@b.json")
}

// A Kubernetes ConfigMap mount: the manifests are symlinks through a
// "..data" symlink that is swapped atomically; no event fires for the
// manifest names.
func TestConfigMapSymlinkSwap(t *testing.T) {
	mkGen := func(dir, gen string, files map[string]string) {
		if err := os.Mkdir(filepath.Join(dir, gen), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, data := range files {
			write(t, filepath.Join(dir, gen, name), data)
		}
	}
	f := start(t, func(dir string) {
		mkGen(dir, "..2026_01", map[string]string{"a.yaml": aYAML, "b.json": bJSON})
		must(t, os.Symlink("..2026_01", filepath.Join(dir, "..data")))
		must(t, os.Symlink("..data/a.yaml", filepath.Join(dir, "a.yaml")))
		must(t, os.Symlink("..data/b.json", filepath.Join(dir, "b.json")))
	}, nil)
	f.wait("a1=one@a.yaml a2=two@a.yaml b1=x@b.json")

	// kubelet's atomic writer: new generation, new symlink, rename over
	// ..data, remove the old generation. b.json is gone from the new one.
	mkGen(f.dir, "..2026_02", map[string]string{"a.yaml": aYAML2})
	must(t, os.Symlink("..2026_02", filepath.Join(f.dir, "..data_tmp")))
	must(t, os.Rename(filepath.Join(f.dir, "..data_tmp"), filepath.Join(f.dir, "..data")))
	must(t, os.RemoveAll(filepath.Join(f.dir, "..2026_01")))
	f.wait("a1=uno@a.yaml a2=two@a.yaml")
}

func TestNotADirectory(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	write(t, file, "")
	_, err := dirsource.NewListerWatcher(file, nil, 0)
	if !errors.Is(err, dirsource.ErrNotDir) {
		t.Fatalf("got %v, want ErrNotDir", err)
	}
}

func TestDefaultMatch(t *testing.T) {
	for name, want := range map[string]bool{
		"a.yaml": true, "a.yml": true, "a.json": true,
		".a.yaml": false, "..data": false, "a.yaml.tmp": false, "a.yaml~": false, "a.txt": false,
	} {
		if got := dirsource.DefaultMatch(name); got != want {
			t.Errorf("DefaultMatch(%q) = %v, want %v", name, got, want)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

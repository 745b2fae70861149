package dirsource_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/converge-go/converge/source"
	"github.com/converge-go/converge/source/dirsource"
)

// Findings 2 and 3: a FIFO, a directory, a symlink loop, a file over the
// size limit and (when not root) an unreadable file, all named like
// manifests, are each reported on their own name; every other file is
// applied, at the start and later; the FIFO is never opened, so resyncs
// and Stop are not blocked. They were never read, so the table is not
// initialized until they are gone.
func TestStrayEntriesFailAlone(t *testing.T) {
	root := os.Geteuid() == 0
	f := start(t, func(dir string) {
		write(t, filepath.Join(dir, "a.yaml"), aYAML)
		must(t, syscall.Mkfifo(filepath.Join(dir, "fifo.yaml"), 0o644))
		must(t, os.Mkdir(filepath.Join(dir, "dir.yaml"), 0o755))
		must(t, os.Symlink("loop.yaml", filepath.Join(dir, "loop.yaml")))
		write(t, filepath.Join(dir, "big.yaml"), "key: big\nvalue: "+strings.Repeat("x", 2000)+"\n")
		if !root {
			write(t, filepath.Join(dir, "noperm.yaml"), bJSON)
			must(t, os.Chmod(filepath.Join(dir, "noperm.yaml"), 0))
		}
	}, func(c *dirsource.Config[*obj]) { c.MaxFileSize = 1024 })
	f.wait("a1=one@a.yaml a2=two@a.yaml")
	want := map[string]error{
		"fifo.yaml": dirsource.ErrNotRegular, "dir.yaml": dirsource.ErrNotRegular,
		"loop.yaml": dirsource.ErrUnreadable, "big.yaml": dirsource.ErrTooLarge,
	}
	if !root {
		want["noperm.yaml"] = dirsource.ErrUnreadable
	}
	s := f.waitStatus("strays reported", func(s source.StatusSnapshot) bool { return s.FailingCount == len(want) })
	for _, e := range s.Failing {
		if !strings.Contains(e.Error, want[e.Key].Error()) {
			t.Errorf("%s: %q, want %v", e.Key, e.Error, want[e.Key])
		}
	}
	if s.Initialized || s.NeverRead != len(want) {
		t.Fatalf("status %+v: the strays were never read; the table must wait", s)
	}

	// The watch goes on: new files and edits apply; a FIFO made now is
	// reported too; a resync completes.
	write(t, filepath.Join(f.dir, "c.json"), `{"key": "c1", "value": "c"}`)
	must(t, syscall.Mkfifo(filepath.Join(f.dir, "late.yaml"), 0o644))
	replace(t, filepath.Join(f.dir, "a.yaml"), aYAML2)
	f.wait("a1=uno@a.yaml a2=two@a.yaml c1=c@c.json")
	f.waitStatus("late FIFO reported", func(s source.StatusSnapshot) bool { return s.FailingCount == len(want)+1 })
	n := f.src.Status().Relists
	f.src.Resync()
	f.waitStatus("resync", func(s source.StatusSnapshot) bool { return s.Relists > n })

	// Once they are gone, the table is initialized.
	for _, name := range []string{"fifo.yaml", "dir.yaml", "loop.yaml", "big.yaml", "noperm.yaml", "late.yaml"} {
		os.Remove(filepath.Join(f.dir, name))
	}
	f.waitStatus("initialized and healthy", func(s source.StatusSnapshot) bool { return s.Initialized && s.Healthy() })
}

// Finding 8: a resync does not read (or decode) a file whose size,
// times and inode are unchanged; one that was touched is read again.
func TestResyncSkipsUnchangedFiles(t *testing.T) {
	var decodes atomic.Int64
	f := start(t, func(dir string) {
		write(t, filepath.Join(dir, "a.yaml"), aYAML)
		write(t, filepath.Join(dir, "b.json"), bJSON)
	}, func(c *dirsource.Config[*obj]) {
		c.Decode = func(name string, data []byte) ([]*obj, error) { decodes.Add(1); return decode(name, data) }
	})
	f.wait("a1=one@a.yaml a2=two@a.yaml b1=x@b.json")
	f.waitStatus("listed", func(s source.StatusSnapshot) bool { return s.Relists == 1 })
	if got := decodes.Load(); got != 2 {
		t.Fatalf("%d decodes after the first list, want 2", got)
	}
	for i := range 3 {
		f.src.Resync()
		f.waitStatus("resync", func(s source.StatusSnapshot) bool { return s.Relists == uint64(i+2) })
	}
	if got := decodes.Load(); got != 2 {
		t.Fatalf("%d decodes after 3 resyncs of unchanged files, want 2", got)
	}
	write(t, filepath.Join(f.dir, "b.json"), bJSON) // same content, new mtime
	f.src.Resync()
	f.waitStatus("resync", func(s source.StatusSnapshot) bool { return s.Relists == 5 })
	if got := decodes.Load(); got < 3 {
		t.Fatalf("%d decodes: a touched file was not read again", got)
	}
	f.wait("a1=one@a.yaml a2=two@a.yaml b1=x@b.json")
}

// Finding 10: a file of whitespace is taken as being written and keeps
// its objects; a file of only comments holds no objects and deletes
// them. Both as documented on ErrEmptyFile and DecodeYAML.
func TestWhitespaceAndCommentFiles(t *testing.T) {
	f := start(t, func(dir string) {
		write(t, filepath.Join(dir, "a.yaml"), aYAML)
		write(t, filepath.Join(dir, "b.json"), bJSON)
	}, nil)
	f.wait("a1=one@a.yaml a2=two@a.yaml b1=x@b.json")
	write(t, filepath.Join(f.dir, "a.yaml"), " \n\t\n")
	write(t, filepath.Join(f.dir, "b.json"), "# nothing here\n")
	f.wait("a1=one@a.yaml a2=two@a.yaml")
	s := f.waitStatus("a.yaml reported", func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
	if s.Failing[0].Key != "a.yaml" || !strings.Contains(s.Failing[0].Error, dirsource.ErrEmptyFile.Error()) {
		t.Fatalf("failing %+v", s.Failing)
	}
}

// Finding 15: "mv a.yaml b.yaml" of an unchanged manifest writes nothing.
func TestRenameWritesNothing(t *testing.T) {
	for i := range 10 {
		f := start(t, func(dir string) { write(t, filepath.Join(dir, "a.yaml"), aYAML) }, func(c *dirsource.Config[*obj]) {
			c.Source.Equal = func(a, b *obj) bool { return a.Key == b.Key && a.Value == b.Value }
		})
		f.wait("a1=one@a.yaml a2=two@a.yaml")
		f.waitStatus("listed", func(s source.StatusSnapshot) bool { return s.Initialized })
		rev := f.table.Revision(f.db.ReadTxn())
		must(t, os.Rename(filepath.Join(f.dir, "a.yaml"), filepath.Join(f.dir, "b.yaml")))
		f.waitStatus("renamed", func(s source.StatusSnapshot) bool {
			return s.Events >= 2 && s.Items == 1 && s.Pending == 0 && s.Healthy()
		})
		if got := f.table.Revision(f.db.ReadTxn()); got != rev {
			t.Fatalf("rename %d wrote: table revision %d -> %d", i, rev, got)
		}
	}
}

// Item 4 for a directory: when the watch fails because the directory is
// gone, the source is Degraded with the time since the last sync and the
// error, keeps its objects, and recovers when the directory is back.
func TestDirectoryGoneIsReported(t *testing.T) {
	f := start(t, func(dir string) { write(t, filepath.Join(dir, "a.yaml"), aYAML) }, nil)
	f.wait("a1=one@a.yaml a2=two@a.yaml")
	moved := f.dir + ".moved"
	must(t, os.Rename(f.dir, moved))
	s := f.waitStatus("degraded", func(s source.StatusSnapshot) bool { return !s.Healthy() })
	if msg := s.HealthMessage(); !strings.Contains(msg, "last sync") || s.LastError == "" {
		t.Fatalf("health %q does not say how old the desired state is and why", msg)
	}
	f.wait("a1=one@a.yaml a2=two@a.yaml")
	must(t, os.Rename(moved, f.dir))
	f.waitStatus("healthy again", func(s source.StatusSnapshot) bool { return s.Healthy() && s.Objects == 2 })
	f.wait("a1=one@a.yaml a2=two@a.yaml")
}

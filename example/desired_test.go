package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/statedb"
)

// Finding 5: a PUT saves the one file it changes, and a DELETE removes
// the one it deletes; the other saved files are not rewritten (every PUT
// rewrote the whole set, 75 MB for twelve 1 MiB files).
func TestChangesSaveOneFile(t *testing.T) {
	a, err := startAgent(t, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	a.Expect(t, "PUT", "/files/a.txt", `{"content": "a"}`, http.StatusCreated, "")
	a.Expect(t, "PUT", "/files/b.txt", `{"content": "b"}`, http.StatusCreated, "")
	stat := func(name string) os.FileInfo {
		fi, err := os.Stat(filepath.Join(defaultSpecDir(a.desired), name))
		if err != nil {
			t.Fatal(err)
		}
		return fi
	}
	aBefore, header := stat("a.txt.json"), stat("../"+filepath.Base(a.desired))
	a.Expect(t, "PUT", "/files/b.txt", `{"content": "bee"}`, http.StatusOK, "")
	a.Expect(t, "PUT", "/files/c.txt", `{"content": "c"}`, http.StatusCreated, "")
	a.Expect(t, "DELETE", "/files/c.txt", "", http.StatusNoContent, "")
	for what, fi := range map[string]os.FileInfo{"a.txt.json": aBefore, "../" + filepath.Base(a.desired): header} {
		if now := stat(what); !os.SameFile(fi, now) || !now.ModTime().Equal(fi.ModTime()) {
			t.Errorf("%s was rewritten by changes of other files", what)
		}
	}
	if got := a.saved(t); !slices.Equal(got, []string{"a.txt.json", "b.txt.json"}) {
		t.Fatalf("saved %v", got)
	}
	if spec, err := readSpec(filepath.Join(defaultSpecDir(a.desired), "b.txt.json")); err != nil || spec.Content != "bee" {
		t.Fatalf("b.txt saved as %+v, %v", spec, err)
	}
}

// Finding 5: the API's files are capped in number and in bytes; a PUT
// past a cap is refused with 403 naming the flag, and changes nothing; a
// change that stays within the caps (a smaller content, after a DELETE)
// is taken.
func TestAPILimits(t *testing.T) {
	root := t.TempDir()
	a, err := startAgentWith(t, filepath.Join(root, "state"), filepath.Join(root, "desired.json"), filepath.Join(root, "shell.sock"),
		"--max-files", "2", "--max-total-bytes", "100")
	if err != nil {
		t.Fatal(err)
	}
	body := func(n int) string { return fmt.Sprintf(`{"content": %q}`, strings.Repeat("x", n)) }
	a.Expect(t, "PUT", "/files/a.txt", body(10), http.StatusCreated, "")
	a.Expect(t, "PUT", "/files/b.txt", body(10), http.StatusCreated, "")
	before := a.savedState(t)
	a.Expect(t, "PUT", "/files/c.txt", body(1), http.StatusForbidden, "--max-files")
	a.Expect(t, "PUT", "/files/a.txt", body(91), http.StatusForbidden, "--max-total-bytes")
	if after := a.savedState(t); after != before {
		t.Fatalf("refused PUTs changed the saved state:\n%s\n%s", before, after)
	}
	a.Expect(t, "PUT", "/files/a.txt", body(90), http.StatusOK, "")
	a.Expect(t, "DELETE", "/files/b.txt", "", http.StatusNoContent, "")
	a.Expect(t, "PUT", "/files/c.txt", body(11), http.StatusForbidden, "--max-total-bytes")
	a.Expect(t, "PUT", "/files/c.txt", body(10), http.StatusCreated, "")
	if n := len(a.listed(t)); n != 2 {
		t.Fatalf("%d files desired, want 2", n)
	}
}

// A desired-state file of an older version, which held the files
// themselves, is converted at start: its files are saved one each, and
// it then names their directory (older versions refuse to start on it,
// instead of taking it for an empty desired set).
func TestConvertsAnOlderDesiredFile(t *testing.T) {
	root := t.TempDir()
	state, desired := filepath.Join(root, "state"), filepath.Join(root, "desired.json")
	old, _ := json.Marshal(map[string]any{"state_dir": state, "files": []FileSpec{{Name: "a.txt", Content: "a\n", Mode: 0o640}}})
	if err := os.WriteFile(desired, old, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := startAgentWith(t, state, desired, filepath.Join(root, "shell.sock"))
	if err != nil {
		t.Fatal(err)
	}
	a.settle(t)
	if err := a.dirMismatch(map[string]want{"a.txt": {"a\n", 0o640}}); err != nil {
		t.Fatal(err)
	}
	got, err := readDesiredFile(desired)
	if err != nil || got.Files != nil || got.FilesDir != "desired.json.d" || got.StateDir != state {
		t.Fatalf("desired-state file after conversion: %+v, %v", got, err)
	}
	if saved := a.saved(t); !slices.Equal(saved, []string{"a.txt.json"}) {
		t.Fatalf("saved %v", saved)
	}
	a.Stop()
	b, err := startAgentWith(t, state, desired, filepath.Join(root, "shell.sock"))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b.listed(t)); n != 1 {
		t.Fatalf("%d files after a restart, want 1", n)
	}
}

// Finding 5: a change is saved without the table's write lock, which the
// reconciler needs for every status it writes: while a save is held up,
// the table can be written.
func TestSaveDoesNotHoldTheTable(t *testing.T) {
	db := statedb.New()
	files, err := newFilesTable(db)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	cfg := defaultConfig
	cfg.StateDir, cfg.DesiredFile = filepath.Join(root, "state"), filepath.Join(root, "desired.json")
	lc := cell.NewDefaultLifecycle(nil, 0, time.Second)
	log := hivetest.Logger(t)
	d, err := newDesiredState(lc, log, db, files, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.Start(log, t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lc.Stop(log, context.Background()) })

	saving, release := make(chan struct{}), make(chan struct{})
	d.beforeSave = func(string) { close(saving); <-release }
	put := make(chan error, 1)
	go func() {
		_, _, err := d.Put(FileSpec{Name: "a.txt", Content: "a", Mode: DefaultMode})
		put <- err
	}()
	<-saving
	locked := make(chan struct{})
	go func() {
		wtxn := db.WriteTxn(files)
		wtxn.Abort()
		close(locked)
	}()
	select {
	case <-locked:
	case <-time.After(20 * time.Second):
		t.Fatal("the table stayed locked while a change was saved")
	}
	close(release)
	if err := <-put; err != nil {
		t.Fatal(err)
	}
	if f, found := d.Get("a.txt"); !found || f.Content != "a" {
		t.Fatalf("a.txt: %+v %v", f, found)
	}
}

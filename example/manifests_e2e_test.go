package main

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/example/internal/agentkit"
	"github.com/converge-go/converge/example/internal/agenttest"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// startWithManifests starts the example with --desired-dir manifests.
func startWithManifests(t *testing.T, root, manifests string) (*agent, *source.Registry) {
	a := &agent{
		dir:     filepath.Join(root, "state"),
		desired: filepath.Join(root, "desired.json"),
		socket:  filepath.Join(root, "shell.sock"),
	}
	var srv *agentkit.Server
	var reg *source.Registry
	h := newHive(cell.Invoke(func(s *agentkit.Server, db *statedb.DB, files statedb.Table[*File], rec reconciler.Reconciler[*File], r *source.Registry) {
		srv, a.db, a.files, a.rec, reg = s, db, files, rec, r
	}))
	a.Agent = agenttest.Start(t, h, []string{
		"--state-dir", a.dir,
		"--desired-file", a.desired,
		"--desired-dir", manifests,
		"--shell-sock-path", a.socket,
		"--http-addr", "127.0.0.1:0",
		"--full-reconciliation-interval", fullInterval.String(),
	}, func() *agentkit.Server { return srv })
	return a, reg
}

// putManifest writes a manifest as editors do: to a hidden temporary
// name, then renamed into place.
func putManifest(t *testing.T, dir, name, data string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// TestManifestsAndAPI feeds one table from the API and from a manifests
// directory, then edits, renames, corrupts and deletes manifests: the
// state directory always ends with exactly the union of both, neither
// writer deletes or overwrites the other's files, and a bad manifest
// loses nothing.
func TestManifestsAndAPI(t *testing.T) {
	root := t.TempDir()
	manifests := filepath.Join(root, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	putManifest(t, manifests, "m1.yaml", "name: b.txt\ncontent: bee\n---\nname: c.txt\ncontent: sea\nmode: \"0600\"\n")
	a, reg := startWithManifests(t, root, manifests)
	a.Expect(t, "PUT", "/files/a.txt", `{"content": "api"}`, http.StatusCreated, "")
	expect := func(what string, files map[string]want) {
		t.Helper()
		eventually(t, what, func() error { return a.dirMismatch(files) })
	}
	base := map[string]want{"a.txt": {"api", 0o644}, "b.txt": {"bee", 0o644}, "c.txt": {"sea", 0o600}}
	expect("API and manifest files", base)
	a.Expect(t, "GET", "/metrics", "", http.StatusOK,
		`converge_source_relists_total{module_id="example",name="manifests",reason="initial"} 1`)

	// Edit: rename into place.
	putManifest(t, manifests, "m1.yaml", "name: b.txt\ncontent: bee2\n---\nname: c.txt\ncontent: sea\nmode: \"0600\"\n")
	base["b.txt"] = want{"bee2", 0o644}
	expect("the edit", base)

	// The API cannot change or delete a manifest's file, and a manifest
	// cannot take the API's.
	a.Expect(t, "PUT", "/files/b.txt", `{"content": "x"}`, http.StatusConflict, "manifests")
	a.Expect(t, "DELETE", "/files/c.txt", "", http.StatusConflict, "manifests")
	putManifest(t, manifests, "steal.yaml", "name: a.txt\ncontent: stolen\n")
	eventually(t, "the conflict reported", func() error {
		return unhealthy(reg, "steal.yaml", source.ErrOwnedByOther.Error())
	})
	expect("the API's file kept", base)
	if err := os.Remove(filepath.Join(manifests, "steal.yaml")); err != nil {
		t.Fatal(err)
	}

	// Corrupt: the file's objects stay, and health names the file and line.
	if err := os.WriteFile(filepath.Join(manifests, "m1.yaml"), []byte("name: b.txt\ncontent: [unclosed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the parse error reported", func() error { return unhealthy(reg, "m1.yaml", "line ") })
	expect("nothing lost to a corrupt manifest", base)

	// A new manifest, then renamed: its file survives the rename.
	putManifest(t, manifests, "m2.json", `{"name": "d.txt", "content": "dee"}`)
	base["d.txt"] = want{"dee", 0o644}
	expect("a new manifest", base)
	if err := os.Rename(filepath.Join(manifests, "m2.json"), filepath.Join(manifests, "m3.json")); err != nil {
		t.Fatal(err)
	}
	expect("the renamed manifest", base)

	// Delete the corrupt manifest: its files go, the API's stay.
	if err := os.Remove(filepath.Join(manifests, "m1.yaml")); err != nil {
		t.Fatal(err)
	}
	delete(base, "b.txt")
	delete(base, "c.txt")
	expect("m1's files deleted", base)
	a.settle(t)

	// The API's files only are saved.
	if got := a.saved(t); !slices.Equal(got, []string{"a.txt.json"}) {
		t.Fatalf("saved desired files %v: want a.txt only", got)
	}
}

// unhealthy returns nil once a source reports a failing item whose key
// and error contain key and msg.
func unhealthy(reg *source.Registry, key, msg string) error {
	for _, s := range reg.Statuses() {
		for _, f := range s.Failing {
			if f.Key == key && strings.Contains(f.Error, msg) {
				return nil
			}
		}
	}
	return errNotYet{key, msg}
}

type errNotYet struct{ key, msg string }

func (e errNotYet) Error() string { return "no failing item " + e.key + " with " + e.msg + " yet" }

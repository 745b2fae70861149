package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The accident this guards against: a desired-state file left in the
// working directory by one run, and a mistyped --state-dir that names a
// directory of real data. Loading the file would make the first full
// reconciliation delete every file of that directory it does not list.
// The agent refuses to start, names both directories, and the data
// survives.
func TestRefusesADesiredFileOfAnotherStateDir(t *testing.T) {
	root := t.TempDir()
	a, err := startAgent(t, root)
	if err != nil {
		t.Fatal(err)
	}
	a.Expect(t, "PUT", "/files/hello.txt", `{"content": "hello\n"}`, http.StatusCreated, "")
	a.settle(t)
	a.Stop()

	data := filepath.Join(root, "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	precious := map[string]string{"data.csv": "a,b\n1,2\n", "notes.txt": "do not lose\n"}
	for name, content := range precious {
		if err := os.WriteFile(filepath.Join(data, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	_, err = startAgentWith(t, data, a.desired, filepath.Join(root, "shell2.sock"))
	if err == nil {
		t.Fatal("the agent started on another directory with a leftover desired-state file")
	}
	for _, want := range []string{"refusing to start", a.desired, a.dir, data} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	for name, content := range precious {
		got, err := os.ReadFile(filepath.Join(data, name))
		if err != nil || string(got) != content {
			t.Errorf("%s: %q, %v; want %q", name, got, err, content)
		}
	}
}

// The same directory by another path (relative, or through a symbolic
// link) is the same directory: the agent starts.
func TestAcceptsTheSameStateDirByAnotherPath(t *testing.T) {
	root := t.TempDir()
	a, err := startAgent(t, root)
	if err != nil {
		t.Fatal(err)
	}
	a.Expect(t, "PUT", "/files/hello.txt", `{"content": "hello\n"}`, http.StatusCreated, "")
	a.settle(t)
	a.Stop()

	link := filepath.Join(root, "link")
	if err := os.Symlink(a.dir, link); err != nil {
		t.Fatal(err)
	}
	b, err := startAgentWith(t, link, a.desired, a.socket)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(b.listed(t)); n != 1 {
		t.Fatalf("%d desired files, want 1", n)
	}
}

// A desired-state file that does not say which directory it is for (the
// bare list older versions wrote) is refused too.
func TestRefusesADesiredFileWithoutStateDir(t *testing.T) {
	root := t.TempDir()
	desired := filepath.Join(root, "desired.json")
	list, _ := json.Marshal([]FileSpec{{Name: "a.txt", Content: "a", Mode: 0o644}})
	if err := os.WriteFile(desired, list, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := startAgent(t, root)
	if err == nil || !strings.Contains(err.Error(), `does not say which state directory`) {
		t.Fatalf("start: %v, want a refusal", err)
	}
}

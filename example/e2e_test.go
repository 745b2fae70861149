package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/shell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/example/internal/agentkit"
	"github.com/converge-go/converge/example/internal/agenttest"
	"github.com/converge-go/converge/reconciler"
)

// fullInterval is the test's full reconciliation interval: short, so that
// drift is repaired quickly.
const fullInterval = 200 * time.Millisecond

// agent is one running example, in-process: the same cells as main, with
// the flags a user would give.
type agent struct {
	*agenttest.Agent
	dir     string // the state directory
	desired string // the desired-state file
	socket  string // the shell's socket
	db      *statedb.DB
	files   statedb.Table[*File]
	rec     reconciler.Reconciler[*File]
}

// startAgent starts the example with its state in root. It listens on a
// free port of 127.0.0.1.
func startAgent(t *testing.T, root string) (*agent, error) {
	return startAgentWith(t, filepath.Join(root, "state"), filepath.Join(root, "desired.json"), filepath.Join(root, "shell.sock"))
}

// startAgentWith starts the example with the given --state-dir,
// --desired-file and --shell-sock-path, and extra flags.
func startAgentWith(t *testing.T, dir, desired, socket string, extra ...string) (*agent, error) {
	a := &agent{dir: dir, desired: desired, socket: socket}
	var srv *agentkit.Server
	h := newHive(cell.Invoke(func(s *agentkit.Server, db *statedb.DB, files statedb.Table[*File], rec reconciler.Reconciler[*File]) {
		srv, a.db, a.files, a.rec = s, db, files, rec
	}))
	var err error
	a.Agent, err = agenttest.TryStart(t, h, append([]string{
		"--state-dir", a.dir,
		"--desired-file", a.desired,
		"--shell-sock-path", a.socket,
		"--http-addr", "127.0.0.1:0",
		"--full-reconciliation-interval", fullInterval.String(),
	}, extra...), func() *agentkit.Server { return srv })
	if err != nil {
		return nil, err
	}
	return a, nil
}

// settle waits until every change made to the table so far is reconciled
// (or given up on), with the reconciler's own wait: no polling.
func (a *agent) settle(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := a.rec.WaitUntilSettled(ctx, a.files.Revision(a.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
}

// attempted waits until every change made to the table so far has been
// attempted once, failed or not.
func (a *agent) attempted(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, _, err := a.rec.WaitUntilReconciled(ctx, a.files.Revision(a.db.ReadTxn())); err != nil {
		t.Fatal(err)
	}
}

// saved lists the files of the saved desired files' directory.
func (a *agent) saved(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(defaultSpecDir(a.desired))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// savedState is the desired-state file and every saved desired file,
// with their contents.
func (a *agent) savedState(t *testing.T) string {
	t.Helper()
	header, err := os.ReadFile(a.desired)
	if err != nil {
		t.Fatal(err)
	}
	out := string(header)
	for _, name := range a.saved(t) {
		data, err := os.ReadFile(filepath.Join(defaultSpecDir(a.desired), name))
		if err != nil {
			t.Fatal(err)
		}
		out += name + ": " + string(data)
	}
	return out
}

// want is a file the state directory should hold.
type want struct {
	content string
	mode    fs.FileMode
}

// dirMismatch says how the state directory differs from files, or returns
// nil when it matches exactly (no other regular file in it).
func (a *agent) dirMismatch(files map[string]want) error {
	entries, err := os.ReadDir(a.dir)
	if err != nil {
		return err
	}
	var have []string
	for _, e := range entries {
		if e.Type().IsRegular() {
			have = append(have, e.Name())
		}
	}
	var names []string
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(have, names) {
		return fmt.Errorf("files %v, want %v", have, names)
	}
	for name, w := range files {
		path := filepath.Join(a.dir, name)
		info, err := os.Stat(path)
		if err != nil {
			return err
		}
		content, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if string(content) != w.content || info.Mode().Perm() != w.mode {
			return fmt.Errorf("%s: %q mode %v, want %q mode %v", name, content, info.Mode().Perm(), w.content, w.mode)
		}
	}
	return nil
}

// eventually waits until check passes, looking every 10ms for at most 5s.
// It is for changes made behind the program's back: the directory has no
// watch channel to wait on, and the repair comes with the next full
// reconciliation.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	agenttest.Eventually(t, what, 5*time.Second, 10*time.Millisecond, check)
}

// listed returns the desired files as GET /files shows them.
func (a *agent) listed(t *testing.T) []File {
	t.Helper()
	var files []File
	body := a.Expect(t, "GET", "/files", "", http.StatusOK, "")
	if err := json.Unmarshal([]byte(body), &files); err != nil {
		t.Fatalf("GET /files: %s in %q", err, body)
	}
	return files
}

func TestEndToEnd(t *testing.T) {
	root := t.TempDir()
	a, err := startAgent(t, root)
	if err != nil {
		t.Fatal(err)
	}

	// Desired files are written, with their modes.
	a.Expect(t, "PUT", "/files/a.txt", `{"content": "alpha\n"}`, http.StatusCreated, `"kind": "Pending"`)
	a.Expect(t, "PUT", "/files/run.sh", `{"content": "#!/bin/sh\n", "mode": "0755"}`, http.StatusCreated, `"mode": "0755"`)
	a.Expect(t, "PUT", "/files/gone.txt", `{"content": ""}`, http.StatusCreated, `"name": "gone.txt"`)
	a.settle(t)
	expected := map[string]want{
		"a.txt":    {"alpha\n", 0o644},
		"run.sh":   {"#!/bin/sh\n", 0o755},
		"gone.txt": {"", 0o644},
	}
	if err := a.dirMismatch(expected); err != nil {
		t.Fatal(err)
	}
	for _, f := range a.listed(t) {
		if f.Status.Kind != reconciler.StatusKindDone {
			t.Fatalf("%s: status %s, want Done", f.Name, f.Status)
		}
	}

	// A change is written, a delete removes the file.
	a.Expect(t, "PUT", "/files/a.txt", `{"content": "alpha 2\n", "mode": "0640"}`, http.StatusOK, `"content": "alpha 2\n"`)
	a.Expect(t, "DELETE", "/files/gone.txt", "", http.StatusNoContent, "")
	a.settle(t)
	delete(expected, "gone.txt")
	expected["a.txt"] = want{"alpha 2\n", 0o640}
	if err := a.dirMismatch(expected); err != nil {
		t.Fatal(err)
	}

	t.Run("bad requests change nothing", func(t *testing.T) { testBadRequests(t, a, expected) })

	t.Run("drift is repaired and strays pruned", func(t *testing.T) { testDrift(t, a, expected) })

	t.Run("healthz reports a failing file", func(t *testing.T) { testFailingFile(t, a, expected) })

	t.Run("metrics", func(t *testing.T) {
		a.Expect(t, "GET", "/metrics", "", http.StatusOK,
			`converge_reconciler_operations_total{module_id="example",name="",op="update",result="ok"}`)
		a.Expect(t, "GET", "/debug/vars", "", http.StatusOK, `"memstats"`)
	})

	t.Run("shell", func(t *testing.T) { testShell(t, a) })

	t.Run("a restart keeps the desired set", func(t *testing.T) {
		a.Stop()
		stray := filepath.Join(a.dir, "stray-while-down.txt")
		if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		b, err := startAgent(t, root)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(b.listed(t)); n != len(expected) {
			t.Fatalf("%d desired files after restart, want %d", n, len(expected))
		}
		eventually(t, "prune after restart", func() error { return b.dirMismatch(expected) })
	})
}

// testBadRequests: requests the API refuses change neither the desired set
// nor the directory.
func testBadRequests(t *testing.T, a *agent, expected map[string]want) {
	desiredBefore := a.savedState(t)
	ok := `{"content": "x"}`
	for _, c := range []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"PUT", "/files/..%2Fescape", ok, 400, `invalid file: name \"../escape\"`},
		{"PUT", "/files/%2E%2E", ok, 400, `name \"..\"`},
		{"PUT", "/files/sub%2Ffile", ok, 400, `name \"sub/file\"`},
		{"PUT", "/files/.hidden", ok, 400, `name \".hidden\"`},
		{"PUT", "/files/with%20space", ok, 400, `name \"with space\"`},
		{"PUT", "/files/" + strings.Repeat("n", 129), ok, 400, "want 1 to 128 letters"},
		{"PUT", "/files/x.txt", "", 400, "empty body"},
		{"PUT", "/files/x.txt", `{"content": `, 400, "bad JSON"},
		{"PUT", "/files/x.txt", `{"contents": "x"}`, 400, `unknown field \"contents\"`},
		{"PUT", "/files/x.txt", `{"mode": "0644"}`, 400, `\"content\" is missing`},
		{"PUT", "/files/x.txt", `{"content": "x"} {}`, 400, "unexpected data after the object"},
		{"PUT", "/files/x.txt", `{"content": "x", "mode": "0999"}`, 400, `mode \"0999\"`},
		{"PUT", "/files/x.txt", `{"content": "x", "mode": 420}`, 400, "bad JSON"},
		{"PUT", "/files/x.txt", `{"content": "x", "mode": "4755"}`, 400, "only permission bits"},
		{"PUT", "/files/x.txt", `{"content": "x", "mode": "0444"}`, 400, "owner must be able to read and write"},
		{"PUT", "/files/x.txt", `{"content": "` + strings.Repeat("x", MaxContentSize+1) + `"}`, 413, "the limit is 1048576"},
		{"PUT", "/files/x.txt", `{"content": "` + strings.Repeat("x", maxBodySize) + `"}`, 413, "the request body is over"},
		{"GET", "/files/x.txt", "", 404, `no desired file \"x.txt\"`},
		{"DELETE", "/files/x.txt", "", 404, `no desired file \"x.txt\"`},
		{"POST", "/files", ok, 405, ""},
	} {
		a.Expect(t, c.method, c.path, c.body, c.status, c.want)
	}
	a.settle(t)
	if err := a.dirMismatch(expected); err != nil {
		t.Fatal(err)
	}
	if n := len(a.listed(t)); n != len(expected) {
		t.Fatalf("%d desired files, want %d", n, len(expected))
	}
	if desiredAfter := a.savedState(t); desiredBefore != desiredAfter {
		t.Fatalf("saved desired state changed:\n%s\nto\n%s", desiredBefore, desiredAfter)
	}
}

// testDrift: files edited, removed or added behind the agent's back are
// repaired and pruned, and the status endpoint shows it.
func testDrift(t *testing.T, a *agent, expected map[string]want) {
	write := func(name, content string, mode fs.FileMode) {
		if err := os.WriteFile(filepath.Join(a.dir, name), []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("a.txt", "edited behind its back\n", 0o640)
	if err := os.Chmod(filepath.Join(a.dir, "run.sh"), 0o600); err != nil {
		t.Fatal(err)
	}
	write("stray.txt", "nobody asked for this\n", 0o644)
	write(".tmp-a.txt-123", "left by a crash\n", 0o600)
	eventually(t, "repair", func() error { return a.dirMismatch(expected) })

	if err := os.Remove(filepath.Join(a.dir, "a.txt")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "restore", func() error { return a.dirMismatch(expected) })

	// The status endpoint shows the full reconciliations.
	var snaps []reconciler.StatusSnapshot
	body := a.Expect(t, "GET", "/status", "", http.StatusOK, `"table": "desired-files"`)
	if err := json.Unmarshal([]byte(body), &snaps); err != nil || len(snaps) != 1 {
		t.Fatalf("GET /status: %v in %q", err, body)
	}
	if s := snaps[0]; !s.Initialized || s.LastFull.At.IsZero() || s.Objects.Done+s.Objects.Refreshing != 2 {
		t.Fatalf("GET /status: %+v", s)
	}
}

// testFailingFile: a file that cannot be written makes /healthz fail
// with its name until a retry writes it.
func testFailingFile(t *testing.T, a *agent, expected map[string]want) {
	a.Expect(t, "GET", "/healthz", "", http.StatusOK, "ok")
	blocker := filepath.Join(a.dir, "blocked.txt")
	if err := os.Mkdir(blocker, 0o755); err != nil {
		t.Fatal(err)
	}
	a.Expect(t, "PUT", "/files/blocked.txt", `{"content": "b"}`, http.StatusCreated, "")
	// The reconciler reports health before it reports progress, so
	// once the change has been attempted the health is Degraded.
	a.attempted(t)
	a.Expect(t, "GET", "/healthz", "", http.StatusServiceUnavailable, "blocked.txt is a directory")
	a.Expect(t, "GET", "/files/blocked.txt", "", http.StatusOK, `"kind": "Error"`)

	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	a.settle(t) // the retry succeeds
	a.Expect(t, "GET", "/healthz", "", http.StatusOK, "ok")
	expected["blocked.txt"] = want{"b", 0o644}
	if err := a.dirMismatch(expected); err != nil {
		t.Fatal(err)
	}
}

// testShell: the operator shell's commands answer over the socket.
func testShell(t *testing.T, a *agent) {
	// What "go run ./example shell reconciler/status" does.
	var out bytes.Buffer
	if err := shell.ShellExchange(shell.Config{ShellSockPath: a.socket}, &out, "reconciler/status"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "desired-files") {
		t.Fatalf("reconciler/status: %q", out.String())
	}
	out.Reset()
	if err := shell.ShellExchange(shell.Config{ShellSockPath: a.socket}, &out, "db/show desired-files"); err != nil {
		t.Fatal(err)
	}
	// Each file with its status, without an age (which would make the
	// table differ from one second to the next).
	if !strings.Contains(out.String(), "blocked.txt") || !strings.Contains(out.String(), "Done") ||
		strings.Contains(out.String(), " ago)") {
		t.Fatalf("db/show: %q", out.String())
	}
}

// A state directory that holds files while there is no desired-state file
// is most likely a mistake: starting would prune every file in it.
func TestRefusesToPruneAForeignDirectory(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	precious := filepath.Join(root, "state", "precious.txt")
	if err := os.WriteFile(precious, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := startAgent(t, root)
	if err == nil || !strings.Contains(err.Error(), "refusing to start") {
		t.Fatalf("start: got %v, want a refusal", err)
	}
	if _, err := os.Stat(precious); err != nil {
		t.Fatal(err)
	}
}

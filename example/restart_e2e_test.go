package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// process is the example agent running as a process of its own.
type process struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	out bytes.Buffer
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.Write(b)
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// startProcess runs the test binary as the agent with args.
func startProcess(t *testing.T, args ...string) *process {
	t.Helper()
	enc, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(os.Environ(), agentArgsEnv+"="+string(enc))
	p.cmd.Stdout, p.cmd.Stderr = p, p
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	return p
}

// kill ends the process with SIGKILL, as a crash or an OOM kill does.
func (p *process) kill() {
	if p.cmd.ProcessState == nil {
		p.cmd.Process.Kill()
		p.cmd.Wait()
	}
}

var serving = regexp.MustCompile(`Serving the HTTP API.*url=(http://\S+/)`)

// healthz returns the agent's /healthz status code and body.
func (p *process) healthz(t *testing.T) (int, string) {
	t.Helper()
	m := serving.FindStringSubmatch(p.log())
	if m == nil {
		return 0, ""
	}
	resp, err := http.Get(m[1] + "healthz")
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// poll waits (bounded) until check passes; the agent is another process,
// so there is nothing to watch but its files and its API.
func poll(t *testing.T, p *process, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; agent log:\n%s", what, p.log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func fileIs(path, want string) func() bool {
	return func() bool { b, err := os.ReadFile(path); return err == nil && string(b) == want }
}

// Finding 1, end to end: the agent applies two manifests and is killed;
// one manifest is then broken (a syntax error, then an empty file), the
// other changed, and the agent restarted. The broken manifest's file
// stays in the state directory (no prune: the table is not initialized),
// /healthz names the manifest and the line, and the other change is
// applied. Fixed, the manifest is applied and the table initialized.
func TestRestartWithBadManifest(t *testing.T) {
	for _, bad := range []string{"name: db.json\ncontent: [5432\n", ""} {
		t.Run(map[bool]string{true: "empty", false: "syntax"}[bad == ""], func(t *testing.T) {
			root := t.TempDir()
			manifests, state := filepath.Join(root, "manifests"), filepath.Join(root, "state")
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(os.Mkdir(manifests, 0o755))
			put := func(name, data string) { must(os.WriteFile(filepath.Join(manifests, name), []byte(data), 0o644)) }
			put("db.yaml", "name: db.json\ncontent: db\n")
			put("web.yaml", "name: web.json\ncontent: web\n")
			args := []string{
				"--state-dir", state, "--desired-file", filepath.Join(root, "desired.json"),
				"--desired-dir", manifests, "--http-addr", "127.0.0.1:0",
				"--shell-sock-path", filepath.Join(root, "shell.sock"),
				"--full-reconciliation-interval", "50ms",
			}
			p := startProcess(t, args...)
			poll(t, p, "both files", func() bool {
				return fileIs(filepath.Join(state, "db.json"), "db")() && fileIs(filepath.Join(state, "web.json"), "web")()
			})
			p.kill()

			put("db.yaml", bad)
			put("web.yaml", "name: web.json\ncontent: web2\n")
			p = startProcess(t, args...)
			poll(t, p, "web.json changed", fileIs(filepath.Join(state, "web.json"), "web2"))
			var body string
			poll(t, p, "/healthz degraded", func() bool {
				code, b := p.healthz(t)
				body = b
				return code == http.StatusServiceUnavailable && strings.Contains(b, "db.yaml")
			})
			want := "yaml: line 2"
			if bad == "" {
				want = "empty file"
			}
			if !strings.Contains(body, "table not initialized") || !strings.Contains(body, want) {
				t.Fatalf("/healthz %q does not say what blocks initialization", body)
			}
			if n := strings.Count(body, want); n != 1 {
				t.Fatalf("/healthz %q says the error %d times", body, n)
			}
			if !fileIs(filepath.Join(state, "db.json"), "db")() {
				t.Fatalf("db.json was removed or changed; agent log:\n%s", p.log())
			}

			put("db.yaml", "name: db.json\ncontent: db2\n")
			poll(t, p, "db.json fixed", fileIs(filepath.Join(state, "db.json"), "db2"))
			poll(t, p, "/healthz OK", func() bool { code, _ := p.healthz(t); return code == http.StatusOK })
			p.kill()
			for _, line := range strings.Split(p.log(), "\n") {
				if strings.Contains(line, "Prune") && strings.Contains(line, "db.json") {
					t.Fatalf("the agent pruned db.json: %s", line)
				}
			}
		})
	}
}

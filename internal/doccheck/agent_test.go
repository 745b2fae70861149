package doccheck

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// goTool returns the go command on PATH: go test runs with it.
func goTool() string {
	return "go"
}

// buildExample builds the files agent (./example) into a temporary
// directory and returns the binary's path.
func buildExample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "example")
	cmd := exec.Command(goTool(), "build", "-o", bin, "./example")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./example: %v\n%s", err, out)
	}
	return bin
}

// freePort returns a TCP port of 127.0.0.1 that nothing listened on a
// moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// logBuffer collects a process's output for error messages.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf.WriteString(line + "\n")
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// agent is one run of the example agent as a process.
type agent struct {
	cmd     *exec.Cmd
	log     logBuffer
	started chan struct{} // closed when the hive has started
	exited  chan struct{} // closed when the process has exited; then err is set
	err     error
}

// startAgent runs bin in dir with args. It does not wait: see ready and
// stop. The test's cleanup stops it if it still runs.
func startAgent(t *testing.T, bin, dir string, args ...string) *agent {
	t.Helper()
	a := &agent{cmd: exec.Command(bin, args...), started: make(chan struct{}), exited: make(chan struct{})}
	a.cmd.Dir = dir
	pr, pw := io.Pipe()
	a.cmd.Stdout, a.cmd.Stderr = pw, pw
	if err := a.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		a.err = a.cmd.Wait()
		pw.Close()
	}()
	go func() {
		defer close(a.exited)
		once := sync.Once{}
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			a.log.add(sc.Text())
			if strings.Contains(sc.Text(), "Started hive") {
				once.Do(func() { close(a.started) })
			}
		}
		io.Copy(io.Discard, pr) // a line too long for the scanner: drain the rest
	}()
	t.Cleanup(func() { a.stop(t) })
	return a
}

// ready waits until the agent has started its hive, and fails the test if
// it exits first or takes longer than a minute.
func (a *agent) ready(t *testing.T) {
	t.Helper()
	select {
	case <-a.started:
	case <-a.exited:
		t.Fatalf("the agent exited before it started (%v):\n%s", a.err, a.log.String())
	case <-time.After(time.Minute):
		t.Fatalf("the agent did not start within a minute:\n%s", a.log.String())
	}
}

// stop sends SIGTERM, as Ctrl-C would SIGINT, and waits for the exit.
func (a *agent) stop(t *testing.T) {
	select {
	case <-a.exited:
		return
	default:
	}
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-a.exited:
	case <-time.After(30 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.exited
		t.Errorf("the agent did not stop within 30s of SIGTERM:\n%s", a.log.String())
	}
}

// exit waits for an agent that is expected to exit by itself, and returns
// its output and its error.
func (a *agent) exit(t *testing.T) (string, error) {
	t.Helper()
	select {
	case <-a.exited:
		return a.log.String(), a.err
	case <-time.After(time.Minute):
		t.Fatalf("the agent did not exit within a minute:\n%s", a.log.String())
		return "", nil
	}
}

// shell runs one line of a README block with sh in dir, and returns what
// it printed on stdout (as a terminal shows it; curl's progress meter,
// which it prints only when stdout is not a terminal, goes to stderr) and
// an error that carries stderr.
func shell(ctx context.Context, dir, line string) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", line)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("%w: %s", err, stderr.String())
	}
	return string(out), err
}

// eventually runs check every 50ms until it returns "" or the deadline
// passes; then it fails the test with check's last answer. It is for
// waiting on another process, which offers no channel to wait on.
func eventually(t *testing.T, within time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, msg)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// portArgs returns the --http-addr flag for port.
func portArgs(port int) []string {
	return []string{"--http-addr", "127.0.0.1:" + strconv.Itoa(port)}
}

// needsTools skips the test without the commands the README's blocks
// use, except under CI=true, where it fails: CI must run it.
func needsTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed; scripts/test.sh installs it", tool)
			}
			t.Skipf("%s is not installed (scripts/test.sh installs it)", tool)
		}
	}
}

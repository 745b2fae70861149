package netlab

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build builds the main package pkg (an import path) into the test's
// temporary directory and returns the binary's path.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	bin := t.TempDir() + "/" + pkg[strings.LastIndex(pkg, "/")+1:]
	if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("netlab: build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// Proc is a process running in a node. Its output is kept for the test's
// log when the test fails.
type Proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	done chan struct{}

	mu    sync.Mutex
	out   bytes.Buffer
	lines chan string
}

// Start starts bin with args in the node's namespace; it is killed in
// t.Cleanup if still running.
func (n *Node) Start(t testing.TB, name, bin string, args ...string) *Proc {
	t.Helper()
	p := &Proc{t: t, name: name, cmd: n.Command(bin, args...), done: make(chan struct{}), lines: make(chan string, 64)}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.cmd.Stderr = &lockedWriter{p: p}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("netlab: start %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.write(sc.Text() + "\n")
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.Kill()
		if t.Failed() {
			p.mu.Lock()
			t.Logf("--- %s output:\n%s", name, p.out.String())
			p.mu.Unlock()
		}
	})
	return p
}

type lockedWriter struct{ p *Proc }

func (w *lockedWriter) Write(b []byte) (int, error) { w.p.write(string(b)); return len(b), nil }

func (p *Proc) write(s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.WriteString(s)
}

// WaitLine waits until the process prints line on its standard output.
func (p *Proc) WaitLine(line string, within time.Duration) {
	p.t.Helper()
	deadline := time.After(within)
	for {
		select {
		case l := <-p.lines:
			if l == line {
				return
			}
		case <-p.done:
			p.t.Fatalf("netlab: %s exited before printing %q", p.name, line)
		case <-deadline:
			p.t.Fatalf("netlab: %s did not print %q within %v", p.name, line, within)
		}
	}
}

// Printed reports whether the process has printed line so far.
func (p *Proc) Printed(line string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(strings.Split(p.out.String(), "\n"), line)
}

// LineWith returns the last line printed so far that starts with prefix.
func (p *Proc) LineWith(prefix string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	lines := strings.Split(p.out.String(), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.HasPrefix(lines[i], prefix) {
			return lines[i], true
		}
	}
	return "", false
}

// Pause stops the process (SIGSTOP) as a long GC pause or a frozen VM
// would; Continue lets it run again.
func (p *Proc) Pause() { _ = p.cmd.Process.Signal(syscall.SIGSTOP) }

// Continue resumes a paused process (SIGCONT).
func (p *Proc) Continue() { _ = p.cmd.Process.Signal(syscall.SIGCONT) }

// Running reports whether the process has not exited.
func (p *Proc) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Kill sends SIGKILL and waits for the process to end.
func (p *Proc) Kill() { p.signal(syscall.SIGKILL) }

// Stop sends SIGTERM and waits for the process to end.
func (p *Proc) Stop() { p.signal(syscall.SIGTERM) }

func (p *Proc) signal(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	_ = p.cmd.Process.Signal(syscall.SIGCONT) // a paused process handles nothing
	<-p.done
}

package agentkit

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/shell"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/health"
)

// startShell starts a hive of the base cells and ShellCell with flags; it
// is stopped when the test ends.
func startShell(t *testing.T, flags ...string) (*hive.Hive, error) {
	t.Helper()
	h := NewHive(append(BaseCells(), ShellCell("agenttest"))...)
	fs := pflag.NewFlagSet(t.Name(), pflag.ContinueOnError)
	h.RegisterFlags(fs)
	if err := fs.Parse(flags); err != nil {
		t.Fatal(err)
	}
	log := hivetest.Logger(t)
	if err := h.Start(log, t.Context()); err != nil {
		h.Stop(log, context.Background())
		return nil, err
	}
	t.Cleanup(func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return h, nil
}

// exchange runs one command in the shell at path, as "PROGRAM shell CMD"
// does.
func exchange(path, cmd string) (string, error) {
	var out strings.Builder
	err := shell.ShellExchange(shell.Config{ShellSockPath: path}, &out, "%s", cmd)
	return out.String(), err
}

// asUser runs fn on a thread whose effective user and group are uid and
// gid, and returns its error. Only that thread changes (raw syscalls: the
// syscall package would change every thread of the process); a thread
// that cannot change back is thrown away with its goroutine.
func asUser(t *testing.T, uid, gid int, fn func() error) error {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("needs root to act as another user, and CI=true: run as root")
		}
		t.Skip("needs root to act as another user")
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		keep := ^uintptr(0) // -1: leave it as it is
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, keep, uintptr(gid), keep); e != 0 {
			errc <- e
			return
		}
		if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, keep, uintptr(uid), keep); e != 0 {
			errc <- e
			return
		}
		err := fn()
		_, _, e1 := unix.RawSyscall(unix.SYS_SETRESUID, keep, 0, keep)
		_, _, e2 := unix.RawSyscall(unix.SYS_SETRESGID, keep, 0, keep)
		if e1 == 0 && e2 == 0 {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// dialRaw connects to the unix socket at path and returns what the server
// says before it closes the connection (at most 4 KiB), without the net
// package's poller: it runs on asUser's thread. It sends nothing, so a
// server that refuses the connection cannot make a write fail.
func dialRaw(path string) (string, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return "", err
	}
	defer unix.Close(fd)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		return "", err
	}
	// A server that accepted the connection would wait for a command:
	// bound the read.
	tv := unix.Timeval{Sec: 10}
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return "", err
	}
	buf := make([]byte, 4096)
	n := 0
	for n < len(buf) {
		m, err := unix.Read(fd, buf[n:])
		if err != nil {
			return string(buf[:n]), err
		}
		if m == 0 {
			break
		}
		n += m
	}
	return string(buf[:n]), nil
}

const nobody = 65534

// Finding 1: under umask 000 the socket is 0600 in a directory of mode
// 0700, so another user (nobody) cannot connect; exec and cat are not
// offered, and no command reaches a file outside the connection's own
// working directory; the agent's own user runs the usual commands.
func TestShellIsForTheAgentsUserOnly(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "run", "agenttest", "shell.sock")
	if _, err := startShell(t, "--shell-sock-path", path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(path)
	if err != nil || fi.Mode()&fs.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v, %v: want a socket of mode 0600", fi.Mode(), err)
	}
	if di, err := os.Lstat(filepath.Dir(path)); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("socket directory %v, %v: want mode 0700", di.Mode(), err)
	}

	if out, err := exchange(path, "help"); err != nil || !strings.Contains(out, "health") || strings.Contains(out, "exec") {
		t.Fatalf("help: %q, %v", out, err)
	}
	if out, err := exchange(path, "health"); err != nil {
		t.Fatalf("health: %q, %v", out, err)
	}
	for _, cmd := range []string{"exec id", "cat /etc/shadow"} {
		if out, err := exchange(path, cmd); err == nil || !strings.Contains(err.Error(), "unknown command") {
			t.Errorf("%s: %q, %v: want an unknown command", cmd, out, err)
		}
	}
	for _, cmd := range []string{"db/show -o /etc/cron.d/x health", "db/show --out=../../x health", "db/insert health /etc/shadow"} {
		if out, err := exchange(path, cmd); err == nil || !strings.Contains(err.Error(), "only files of its own working directory") {
			t.Errorf("%s: %q, %v: want a refusal", cmd, out, err)
		}
	}

	err = asUser(t, nobody, nobody, func() error { _, err := dialRaw(path); return err })
	if !errors.Is(err, unix.EACCES) {
		t.Fatalf("nobody connected: %v, want permission denied", err)
	}
}

// The socket's directory is checked at start: one that others can write,
// that another user owns or that is a symbolic link fails the start,
// naming the problem, and so does a path that is not a socket (which is
// left alone) or a socket another agent serves.
func TestShellRefusesAnUnsafeDirectory(t *testing.T) {
	root := t.TempDir()
	open := filepath.Join(root, "open")
	must(t, os.Mkdir(open, 0o700))
	must(t, os.Chmod(open, 0o777))
	sticky := filepath.Join(root, "sticky")
	must(t, os.Mkdir(sticky, 0o700))
	must(t, os.Chmod(sticky, 0o1777|fs.ModeSticky))
	link := filepath.Join(root, "link")
	must(t, os.Symlink(open, link))
	file := filepath.Join(root, "private", "file")
	must(t, os.MkdirAll(filepath.Dir(file), 0o700))
	must(t, os.WriteFile(file, []byte("keep"), 0o600))
	cases := map[string]string{
		filepath.Join(open, "s.sock"):   "others can write it",
		filepath.Join(sticky, "s.sock"): "others can write it",
		filepath.Join(link, "s.sock"):   "symbolic link",
		file:                            "is not a socket",
	}
	if os.Geteuid() == 0 {
		theirs := filepath.Join(root, "theirs")
		must(t, os.Mkdir(theirs, 0o700))
		must(t, os.Chown(theirs, nobody, nobody))
		cases[filepath.Join(theirs, "s.sock")] = "belongs to uid 65534"
	}
	for path, want := range cases {
		if _, err := startShell(t, "--shell-sock-path", path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", path, err, want)
		}
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "keep" {
		t.Fatalf("the file at the socket's path: %q, %v", b, err)
	}

	live := filepath.Join(root, "private", "s.sock")
	if _, err := startShell(t, "--shell-sock-path", live); err != nil {
		t.Fatal(err)
	}
	if _, err := startShell(t, "--shell-sock-path", live); err == nil || !strings.Contains(err.Error(), "another process serves") {
		t.Fatalf("second agent on one socket: %v", err)
	}
	if _, err := exchange(live, "health"); err != nil {
		t.Fatalf("the first agent's shell after the second failed: %v", err)
	}
}

// A connection from another user is refused even when someone loosened
// the socket's and its directory's modes.
func TestShellRefusesOtherUsers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "shell.sock")
	if _, err := startShell(t, "--shell-sock-path", path); err != nil {
		t.Fatal(err)
	}
	must(t, os.Chmod(filepath.Dir(path), 0o755))
	must(t, os.Chmod(path, 0o666))
	// Let nobody through the test's own directories, up to the system's
	// temporary directory, which is not touched.
	tmp := filepath.Clean(os.TempDir())
	if fi, err := os.Stat(tmp); err != nil || fi.Mode().Perm()&0o001 == 0 {
		t.Skipf("%s is closed to other users: %v", tmp, err)
	}
	for d := filepath.Dir(path); d != tmp && d != "/"; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o001 == 0 {
			must(t, os.Chmod(d, fi.Mode().Perm()|0o011))
		}
	}
	var said string
	err := asUser(t, nobody, nobody, func() (err error) { said, err = dialRaw(path); return err })
	if err != nil || !strings.Contains(said, "refused: uid 65534") || !strings.HasSuffix(said, errorMarker+"\n") {
		t.Fatalf("nobody got %q, %v", said, err)
	}
}

// --shell-unrestricted offers exec and cat, for an operator who wants
// them.
func TestShellUnrestricted(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("contents\n"), 0o600))
	path := filepath.Join(dir, "run", "shell.sock")
	if _, err := startShell(t, "--shell-sock-path", path, "--shell-unrestricted"); err != nil {
		t.Fatal(err)
	}
	if out, err := exchange(path, "cat "+filepath.Join(dir, "f")); err != nil || !strings.Contains(out, "contents") {
		t.Fatalf("cat: %q, %v", out, err)
	}
	if out, err := exchange(path, "exec echo ran"); err != nil || !strings.Contains(out, "ran") {
		t.Fatalf("exec: %q, %v", out, err)
	}
}

func TestDefaultShellSocket(t *testing.T) {
	for _, tc := range []struct {
		euid            int
		runtimeDir, tmp string
		want            string
	}{
		{0, "/run/user/0", "/tmp", "/run/agent/shell.sock"},
		{1000, "/run/user/1000", "/tmp", "/run/user/1000/agent/shell.sock"},
		{1000, "", "/tmp", "/tmp/agent-1000/shell.sock"},
	} {
		if got := defaultShellSocket("agent", tc.euid, tc.runtimeDir, tc.tmp); got != tc.want {
			t.Errorf("%+v: %s", tc, got)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Issue 52 item 4: another user who created the default socket directory
// first ($TMPDIR/PROGRAM-UID, without XDG_RUNTIME_DIR) does not keep the
// agent from starting: it starts without its shell, and the "shell"
// health scope says why and what to do.
func TestShellOffWhenDefaultDirTaken(t *testing.T) {
	taken := filepath.Join(t.TempDir(), "agenttest-1000")
	must(t, os.Mkdir(taken, 0o700))
	want := "others can write it"
	if os.Geteuid() == 0 {
		must(t, os.Chown(taken, nobody, nobody))
		want = "belongs to uid 65534"
	} else {
		must(t, os.Chmod(taken, 0o777))
	}
	var hl *health.Health
	h := NewHive(append(BaseCells(), shellCell(filepath.Join(taken, "shell.sock")),
		cell.Invoke(func(x *health.Health) { hl = x }))...)
	log := hivetest.Logger(t)
	if err := h.Start(log, t.Context()); err != nil {
		t.Fatalf("the agent did not start: %v", err)
	}
	t.Cleanup(func() { must(t, h.Stop(log, context.Background())) })
	degraded := hl.Degraded()
	if len(degraded) != 1 || degraded[0].Scope != "shell" || !strings.Contains(degraded[0].String(), want) ||
		!strings.Contains(degraded[0].String(), "XDG_RUNTIME_DIR") {
		t.Fatalf("degraded: %v, want the shell's scope saying %q", degraded, want)
	}
	if _, err := os.Lstat(filepath.Join(taken, "shell.sock")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a socket in the taken directory: %v", err)
	}
}

// The client ("PROGRAM shell") refuses a socket in a directory that is
// not its user's alone: what answers there could be another user's.
func TestShellClientChecksTheDirectory(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open")
	must(t, os.Mkdir(open, 0o700))
	must(t, os.Chmod(open, 0o777))
	if err := checkShellSocket(filepath.Join(open, "shell.sock")); err == nil || !strings.Contains(err.Error(), "others can write it") {
		t.Fatalf("open directory: %v", err)
	}
	private := filepath.Join(dir, "private")
	must(t, os.Mkdir(private, 0o700))
	if err := checkShellSocket(filepath.Join(private, "shell.sock")); err != nil {
		t.Fatalf("private directory: %v", err)
	}
	if err := checkShellSocket(filepath.Join(dir, "missing", "shell.sock")); err != nil {
		t.Fatalf("missing directory: %v", err)
	}
}

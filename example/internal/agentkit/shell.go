package agentkit

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/script"
	"github.com/spf13/pflag"
)

// ShellCell serves the hive shell of program (the script commands of the
// hive: db/..., reconciler/..., health, help) on a unix socket for the
// agent's own user, in the protocol of hive's shell client, so that
// "PROGRAM shell" (Main) talks to it. It replaces hive's
// shell.ServerCell, which creates its socket wherever it is told with the
// mode the umask gives (srwxrwxrwx under umask 000) and offers exec and
// cat, so that any local user could run programs as the agent, root
// included. Here:
//
//   - The socket is created with mode 0600 in a directory that no one
//     else can write (DefaultShellSocket by default, never the working
//     directory). When the directory is writable by others or not the
//     agent user's, the start fails, naming the problem, for a
//     --shell-sock-path given; for the default one, which another user
//     may have created first ($TMPDIR/PROGRAM-UID), the agent starts
//     without its shell and the "shell" health scope is degraded, saying
//     why.
//   - Connections from another user (SO_PEERCRED, on Linux) are refused
//     even if someone loosened the socket's mode.
//   - No command runs programs or reads or writes files outside a private
//     working directory of the connection, unless --shell-unrestricted
//     adds exec and cat and lifts the path check.
func ShellCell(program string) cell.Cell { return shellCell(DefaultShellSocket(program)) }

// shellCell is ShellCell with defaultPath as the default socket.
func shellCell(defaultPath string) cell.Cell {
	return cell.Module(
		"shell",
		"The hive shell on a unix socket for the agent user only",
		cell.Config(ShellConfig{ShellSockPath: defaultPath}),
		cell.Invoke(func(p shellParams) { registerShell(p, defaultPath) }),
	)
}

// ShellConfig is the shell's configuration (its flags).
type ShellConfig struct {
	// ShellSockPath is the socket; "" turns the shell off.
	ShellSockPath string
	// ShellUnrestricted adds exec and cat, and lets commands use any path.
	ShellUnrestricted bool
}

// Flags implements cell.Flagger.
func (def ShellConfig) Flags(flags *pflag.FlagSet) {
	flags.String("shell-sock-path", def.ShellSockPath,
		"Unix socket of the hive shell, for the agent's own user only: its directory must not be writable by others "+
			"(a missing one is created with mode 0700), the socket gets mode 0600; \"\" turns the shell off")
	flags.Bool("shell-unrestricted", def.ShellUnrestricted,
		"Also offer exec and cat in the shell, and let its commands read and write files anywhere "+
			"(by default they see only a private working directory)")
}

// DefaultShellSocket is where program's shell socket is unless
// --shell-sock-path says otherwise: /run/PROGRAM/shell.sock for root,
// $XDG_RUNTIME_DIR/PROGRAM/shell.sock for others, and
// $TMPDIR/PROGRAM-UID/shell.sock when XDG_RUNTIME_DIR is not set. The
// agent and "PROGRAM shell", run by the same user, agree on it.
func DefaultShellSocket(program string) string {
	return defaultShellSocket(program, os.Geteuid(), os.Getenv("XDG_RUNTIME_DIR"), os.TempDir())
}

func defaultShellSocket(program string, euid int, runtimeDir, tmp string) string {
	switch {
	case euid == 0:
		return filepath.Join("/run", program, "shell.sock")
	case runtimeDir != "":
		return filepath.Join(runtimeDir, program, "shell.sock")
	}
	return filepath.Join(tmp, fmt.Sprintf("%s-%d", program, euid), "shell.sock")
}

type shellParams struct {
	cell.In

	Log       *slog.Logger
	Lifecycle cell.Lifecycle
	Cmds      hive.ScriptCmds
	Config    ShellConfig
	Health    cell.Health
}

func registerShell(p shellParams, defaultPath string) {
	if p.Config.ShellSockPath == "" {
		return
	}
	s := &shellServer{log: p.Log, path: p.Config.ShellSockPath, conns: map[net.Conn]struct{}{},
		isDefault: p.Config.ShellSockPath == defaultPath, health: p.Health.NewScope("shell")}
	s.engine = &script.Engine{Cmds: shellCommands(p.Cmds.Map(), p.Config.ShellUnrestricted)}
	p.Lifecycle.Append(cell.Hook{OnStart: s.start, OnStop: s.stop})
}

// shellCommands is what the shell offers: the hive's commands and help;
// unrestricted, also exec and cat. Restricted, every command is refused
// a path outside the connection's working directory (confined).
func shellCommands(cmds map[string]script.Cmd, unrestricted bool) map[string]script.Cmd {
	def := script.DefaultCmds()
	out := make(map[string]script.Cmd, len(cmds)+3)
	for name, c := range cmds {
		out[name] = c
	}
	out["help"] = def["help"]
	if unrestricted {
		out["exec"], out["cat"] = def["exec"], def["cat"]
		return out
	}
	for name, c := range out {
		out[name] = confined{c}
	}
	return out
}

// confined is a command that is refused absolute paths and "..": the
// db/... commands read (db/insert, db/cmp) and write (db/show -o) files
// relative to the shell's working directory, a private one per
// connection.
type confined struct{ script.Cmd }

// Run implements script.Cmd. The engine has parsed the command's flags
// into s.Flags already; their values are checked as the arguments are.
func (c confined) Run(s *script.State, args ...string) (script.WaitFunc, error) {
	var err error
	if s.Flags != nil {
		s.Flags.Visit(func(f *pflag.Flag) {
			if f.Name != "autocomplete" && err == nil {
				err = checkShellArg(f.Value.String())
			}
		})
	}
	for _, a := range args {
		if err == nil {
			err = checkShellArg(a)
		}
	}
	if err != nil {
		return nil, err
	}
	return c.Cmd.Run(s, args...)
}

// checkShellArg refuses an argument, or a flag's value (--out=/x), that
// is an absolute path or climbs out with "..".
func checkShellArg(arg string) error {
	for _, v := range []string{arg, arg[strings.IndexByte(arg, '=')+1:]} {
		if filepath.IsAbs(v) || slices.Contains(strings.Split(filepath.ToSlash(v), "/"), "..") {
			return fmt.Errorf("%q: the shell's commands use only files of its own working directory "+
				"(the agent's --shell-unrestricted lifts this)", arg)
		}
	}
	return nil
}

// The protocol of hive's shell client: a command per line; its output,
// then endMarker, or its error then errorMarker; "exit" ends.
const (
	endMarker   = "<<end>>"
	errorMarker = "<<error>>"
)

// shellServer serves the shell from the hive's start to its stop.
type shellServer struct {
	log    *slog.Logger
	path   string
	engine *script.Engine
	// isDefault: path is DefaultShellSocket's, which another user may
	// have taken first; health reports the shell off.
	isDefault bool
	health    cell.Health

	ln     *net.UnixListener
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// start checks the socket's directory, creates the socket with mode 0600
// and accepts connections. Any problem fails the hive's start, but for an
// unsafe directory of the default path: any local user can create
// $TMPDIR/PROGRAM-UID first, and must not keep the agent from starting.
// The shell is off then, and its health scope says why.
func (s *shellServer) start(cell.HookContext) error {
	ln, err := listenPrivate(s.path)
	var unsafe *unsafeDirError
	if err != nil && s.isDefault && errors.As(err, &unsafe) {
		err = fmt.Errorf("%w; give the agent a directory of its own: XDG_RUNTIME_DIR (systemd: RuntimeDirectory=) "+
			"or --shell-sock-path", err)
		s.log.Warn("Shell off", "error", err)
		s.health.Degraded("shell off", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("shell: %w", err)
	}
	s.health.OK("listening on " + s.path)
	s.ln = ln
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.wg.Add(1)
	go s.accept()
	s.log.Info("Shell listening", "socket", s.path)
	return nil
}

// stop closes the socket and every connection, and waits for them.
func (s *shellServer) stop(cell.HookContext) error {
	if s.ln == nil {
		return nil // off
	}
	s.cancel()
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	removeSocket(s.path)
	return err
}

func (s *shellServer) accept() {
	defer s.wg.Done()
	for {
		conn, err := s.ln.AcceptUnix()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("Shell stopped accepting", "error", err)
			}
			return
		}
		if err := checkPeer(conn); err != nil {
			s.log.Warn("Shell connection refused", "error", err)
			fmt.Fprintf(conn, "%s%s\n", err, errorMarker)
			conn.Close()
			continue
		}
		s.mu.Lock()
		s.conns[conn] = struct{}{}
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			defer func() {
				s.mu.Lock()
				delete(s.conns, conn)
				s.mu.Unlock()
				conn.Close()
			}()
			if err := s.serve(conn); err != nil {
				s.log.Warn("Shell connection ended", "error", err)
			}
		}()
	}
}

// serve runs one connection's commands, in a private working directory
// that is removed afterwards.
func (s *shellServer) serve(conn net.Conn) error {
	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	work, err := os.MkdirTemp(filepath.Dir(s.path), "work-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	// Not the agent's environment: $VARIABLES expand to the shell's own
	// ($WORK, $PWD) and $PATH (for exec), never to the agent's secrets.
	state, err := script.NewState(ctx, work, []string{"WORK=" + work, "PATH=" + os.Getenv("PATH")})
	if err != nil {
		return err
	}
	// A failed write (the client went away) cancels the command.
	out := writerFunc(func(b []byte) (int, error) {
		n, err := conn.Write(b)
		if err != nil {
			cancel()
		}
		return n, err
	})
	in := bufio.NewReader(conn)
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		switch line = strings.TrimRight(line, "\r\n"); line {
		case "exit", "quit", "stop":
			return nil
		}
		if err := s.execute(state, line, out); err != nil {
			_, err = fmt.Fprintf(out, "%s%s\n", err, errorMarker)
			if err != nil {
				return err
			}
		} else if _, err := fmt.Fprintln(out, endMarker); err != nil {
			return err
		}
	}
}

// execute runs one command line; a panic is its error.
func (s *shellServer) execute(state *script.State, line string, out io.Writer) (err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("Panic in a shell command", "line", line, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("PANIC: %v", p)
		}
	}()
	return s.engine.ExecuteLine(state, line, out)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(b []byte) (int, error) { return f(b) }

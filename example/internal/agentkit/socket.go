package agentkit

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// listenPrivate listens on a unix socket at path that only this process's
// user can use: its directory is checked (privateDir), and the socket is
// bound in a new private directory, given mode 0600 and only then moved
// into place, so it is never reachable with the mode the umask gives. A
// stale socket of an earlier run is replaced; a live one (another agent)
// or anything else at path fails.
func listenPrivate(path string) (*net.UnixListener, error) {
	dir := filepath.Dir(path)
	if err := privateDir(dir); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&fs.ModeSocket == 0 {
			return nil, fmt.Errorf("%s exists and is not a socket: remove it, or choose another --shell-sock-path", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("%s: another process serves this socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	tmp, err := os.MkdirTemp(dir, ".bind-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// The socket file is moved, so closing the listener must not remove
	// the old name; stop removes the new one.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(bound, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	if err := os.Rename(bound, path); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// privateDir checks that dir is a directory (not a symbolic link) of this
// process's user that no one else can write, creating it (and missing
// parents) with mode 0700 when it does not exist: in a directory others
// can write, they could replace the socket with their own. A directory
// that fails the check is an *unsafeDirError.
func privateDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		// MkdirAll's mode is masked by the umask; 0700 is what we want
		// whatever the umask is.
		if err := os.Chmod(dir, 0o700); err != nil {
			return err
		}
		fi, err = os.Lstat(dir)
	}
	if err != nil {
		return err
	}
	return checkPrivateDir(dir, fi)
}

// unsafeDirError is a socket directory that someone else could use to
// replace the socket: not ours, writable by others, or a symbolic link.
type unsafeDirError struct{ msg string }

func (e *unsafeDirError) Error() string { return e.msg }

// checkPrivateDir checks what privateDir checks of an existing dir, whose
// Lstat is fi.
func checkPrivateDir(dir string, fi fs.FileInfo) error {
	unsafe := func(format string, args ...any) error { return &unsafeDirError{fmt.Sprintf(format, args...)} }
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return unsafe("socket directory %s is a symbolic link: give its real path", dir)
	case !fi.IsDir():
		return unsafe("socket directory %s is not a directory", dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return unsafe("socket directory %s belongs to uid %d, not to the agent's user (uid %d): "+
			"another user could replace the socket", dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return unsafe("socket directory %s has mode %04o: others can write it and replace the socket; "+
			"make it 0700 (chmod go-w) or choose another --shell-sock-path", dir, perm)
	}
	return nil
}

// checkShellSocket is the client's check of the socket at path: its
// directory, when there is one, must pass checkPrivateDir, or whatever
// answers there may be another user's, who would see the commands typed.
func checkShellSocket(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // connecting fails, and says so
	}
	if err != nil {
		return err
	}
	return checkPrivateDir(dir, fi)
}

// removeSocket removes the socket at path if it is one.
func removeSocket(path string) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSocket != 0 {
		os.Remove(path)
	}
}

package main

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/internal/netroute"
)

// errNamespaceClosed is returned by netns.do after Close.
var errNamespaceClosed = errors.New("network namespace closed")

// errPrivileges is wrapped by the errors of newPrivateNetns, openNetns and
// netns.do when the process may not create or enter a network namespace.
var errPrivileges = errors.New("creating or entering a network namespace needs CAP_SYS_ADMIN " +
	"(and nft needs CAP_NET_ADMIN in it): run as root")

// netns is a network namespace that commands run in. No thread of the
// program stays in it: each command runs on a throwaway OS thread that
// enters the namespace, starts the command (a child inherits the
// namespace of the thread that forks it) and exits once the command has
// finished. So the program itself, its HTTP API included, stays in the
// namespace it was started in.
type netns struct {
	mu   sync.RWMutex // held for reading by each do, so Close waits for them
	file *os.File     // keeps the namespace alive; nil once closed
}

// newPrivateNetns creates a new, empty network namespace that lives until
// Close (or until nothing else holds it).
func newPrivateNetns() (*netns, error) {
	var file *os.File
	err := netroute.OnThread(func() error {
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			return privileges("create a network namespace", err)
		}
		var err error
		file, err = os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &netns{file: file}, nil
}

// openNetns opens the existing network namespace at path: a file that ip
// netns add made (/run/netns/NAME), or /proc/PID/ns/net. Close does not
// destroy it.
func openNetns(path string) (*netns, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, privileges("open the network namespace "+path, err)
	}
	var st unix.Statfs_t
	if err := unix.Fstatfs(int(file.Fd()), &st); err != nil || st.Type != unix.NSFS_MAGIC {
		file.Close()
		return nil, fmt.Errorf("network namespace %s: not a namespace file (want /run/netns/NAME or /proc/PID/ns/net)", path)
	}
	return &netns{file: file}, nil
}

// Path is a path that opens the namespace for as long as n is open, for
// nsenter --net=PATH (the namespace may have no name of its own).
func (n *netns) Path() string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.file == nil {
		return ""
	}
	return fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), n.file.Fd())
}

// do runs fn on an OS thread that is in the namespace; commands fn starts
// run in it. It fails with errNamespaceClosed after Close.
func (n *netns) do(fn func() error) error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.file == nil {
		return errNamespaceClosed
	}
	fd := int(n.file.Fd())
	return netroute.OnThread(func() error {
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			return privileges("enter the network namespace", err)
		}
		return fn()
	})
}

// Close lets go of the namespace, once every do has returned. A namespace
// made by newPrivateNetns is destroyed with its ruleset once nothing else
// holds it.
func (n *netns) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.file == nil {
		return nil
	}
	err := n.file.Close()
	n.file = nil
	return err
}

// privileges explains a permission error.
func privileges(what string, err error) error {
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("cannot %s: %w: %w", what, err, errPrivileges)
	}
	return fmt.Errorf("cannot %s: %w", what, err)
}

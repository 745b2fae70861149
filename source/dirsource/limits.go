package dirsource

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
)

// limitError turns the errors inotify gives for exhausted kernel limits
// into ones that say which limit and how to raise it. Other errors pass
// unchanged.
func limitError(op string, err error) error {
	switch {
	case errors.Is(err, syscall.EMFILE):
		return fmt.Errorf("%s: %w: too many inotify instances; raise fs.inotify.max_user_instances (now %s): %w",
			op, ErrInotifyLimit, sysctl("max_user_instances"), err)
	case errors.Is(err, syscall.ENOSPC):
		return fmt.Errorf("%s: %w: too many inotify watches; raise fs.inotify.max_user_watches (now %s): %w",
			op, ErrInotifyLimit, sysctl("max_user_watches"), err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

func sysctl(name string) string {
	b, err := os.ReadFile("/proc/sys/fs/inotify/" + name)
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(b))
}

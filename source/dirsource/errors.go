package dirsource

import "errors"

var (
	// ErrInotifyLimit is wrapped by the error of a source that could not
	// get an inotify instance or watch because a kernel limit was reached
	// (fs.inotify.max_user_instances or fs.inotify.max_user_watches).
	ErrInotifyLimit = errors.New("inotify limit reached")

	// ErrUnsupportedFS is wrapped by the error of a source whose
	// directory is on a filesystem where inotify misses changes (made by
	// other hosts, or by the FUSE daemon).
	ErrUnsupportedFS = errors.New("filesystem does not support inotify reliably")

	// ErrEmptyFile is reported for an empty manifest: it is taken as a
	// file its writer has truncated and not written yet, so its objects
	// are kept. Remove a file to delete its objects.
	ErrEmptyFile = errors.New("empty file (being written?): its objects are kept; remove the file to delete them")

	// ErrNotRegular is reported on a manifest name that is not a regular
	// file (after symlinks): a directory, a FIFO, a socket, a device. It
	// is never opened; the other files are applied.
	ErrNotRegular = errors.New("not a regular file")

	// ErrUnreadable is reported on a manifest that cannot be read (no
	// permission, a symlink loop); the other files are applied, and the
	// file keeps the objects it had.
	ErrUnreadable = errors.New("cannot read the file")

	// ErrTooLarge is reported on a manifest over Config.MaxFileSize; it
	// is not read, and keeps the objects it had.
	ErrTooLarge = errors.New("file too large")

	// ErrOutsideDir is reported on a manifest name that is a symbolic
	// link resolving outside the directory, unless
	// Config.AllowSymlinksOutside is set. It is never opened; the other
	// files are applied, and it keeps the objects it had.
	ErrOutsideDir = errors.New("symbolic link resolves outside the directory")

	// ErrNotDir is wrapped when Config.Dir is not a directory.
	ErrNotDir = errors.New("not a directory")
)

package dirsource

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// DefaultMaxFileSize bounds a manifest: far above what people write by
// hand or a ConfigMap holds (1 MiB), low enough that a stray log file or
// disk image named *.yaml cannot take the agent's memory.
const DefaultMaxFileSize = 16 << 20

// stamp is what a stat says about a file's content: if none of it
// changed, the content did not either (a write changes mtime and ctime,
// a rename-into-place the inode), so a resync need not read the file.
type stamp struct {
	dev, ino    uint64
	size        int64
	mtime       int64
	ctime       int64
	mode        fs.FileMode
	unavailable bool // stat itself failed (the error is in the file)
}

// read reads one manifest without ever blocking: it stats the name
// (following symlinks, as a ConfigMap's are), refuses what is not a
// regular file or is over max, and opens with O_NONBLOCK, checking the
// opened file again, so that a FIFO or device swapped in meanwhile is
// never read. A problem with the file is returned in File.Err, for the
// source to report on that file alone; gone says it does not exist.
func read(dir, name string, max int64) (f File, st stamp, gone bool) {
	f.Name = name
	path := filepath.Join(dir, name)
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		// Gone, or a dangling symlink (a ConfigMap's after its data
		// moved on): a file that is not there.
		return f, st, true
	}
	if err != nil {
		f.Err = fmt.Errorf("%w: %w", ErrUnreadable, err)
		return f, stamp{unavailable: true}, false
	}
	st = stampOf(fi)
	if err := checkEntry(fi, max); err != nil {
		f.Err = err
		return f, st, false
	}
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return f, st, true
		}
		f.Err = fmt.Errorf("%w: %w", ErrUnreadable, err)
		return f, st, false
	}
	defer file.Close()
	fi, err = file.Stat()
	if err == nil {
		err = checkEntry(fi, max)
	}
	if err != nil {
		f.Err = err
		return f, st, false
	}
	st = stampOf(fi)
	data, err := io.ReadAll(io.LimitReader(file, max+1))
	switch {
	case err != nil:
		f.Err = fmt.Errorf("%w: %w", ErrUnreadable, err)
	case int64(len(data)) > max:
		f.Err = fmt.Errorf("%w: over %d bytes", ErrTooLarge, max)
	default:
		f.Data = data
	}
	return f, st, false
}

// checkEntry refuses what is not a regular file, or is over max bytes.
func checkEntry(fi fs.FileInfo, max int64) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s", ErrNotRegular, kind(fi.Mode()))
	}
	if fi.Size() > max {
		return fmt.Errorf("%w: %d bytes, over %d (Config.MaxFileSize)", ErrTooLarge, fi.Size(), max)
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	}
	return "not a regular file (" + m.String() + ")"
}

package dirsource

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// DefaultMaxFileSize bounds a manifest: four times what a ConfigMap holds
// (1 MiB), low enough that a stray log file or disk image named *.yaml
// cannot take the agent's memory, nor a hostile manifest: yaml/v3 builds a
// document's whole node tree before anything can check it, about 100
// bytes of memory per byte of a manifest of one-byte list items (16 MiB
// took 1.7 GB), so the bound on the file is the bound on that.
const DefaultMaxFileSize = 4 << 20

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
// regular file, is over max or (unless allowed) resolves outside the
// directory, and opens with O_NONBLOCK, checking the opened file again,
// so that a FIFO or device swapped in meanwhile is never read, nor a file
// outside the directory that a link swapped in meanwhile points to. A
// problem with the file is returned in File.Err, for the source to report
// on that file alone; gone says it does not exist.
func (lw *ListerWatcher) read(name string) (f File, st stamp, gone bool) {
	// A file replaced while it was opened (an editor's rename) is read
	// again; see opened.
	for range 3 {
		f, st, gone = lw.readOnce(name)
		if !errors.Is(f.Err, errReplaced) {
			break
		}
	}
	return f, st, gone
}

// errReplaced is readOnce's error for a name whose file changed between
// the checks and the open.
var errReplaced = fmt.Errorf("%w: the file was replaced while it was opened", ErrUnreadable)

func (lw *ListerWatcher) readOnce(name string) (f File, st stamp, gone bool) {
	f.Name = name
	path := filepath.Join(lw.dir, name)
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
	if _, err := lw.inside(path); err != nil {
		f.Err = err
		return f, st, errors.Is(err, fs.ErrNotExist)
	}
	if err := checkEntry(fi, lw.maxSize()); err != nil {
		f.Err = err
		return f, st, false
	}
	if lw.opening != nil {
		lw.opening(path, false)
	}
	file, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if lw.opening != nil {
		lw.opening(path, true)
	}
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
		err = checkEntry(fi, lw.maxSize())
	}
	if err == nil {
		err = lw.opened(path, fi)
	}
	if err != nil {
		f.Err = err
		return f, st, errors.Is(err, fs.ErrNotExist)
	}
	st = stampOf(fi)
	max := lw.maxSize()
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

// inside resolves path's symbolic links and fails with ErrOutsideDir when
// the file they lead to is not in the directory (unless
// AllowSymlinksOutside), or with an error wrapping fs.ErrNotExist when
// there is nothing there any more. It returns the resolved path.
func (lw *ListerWatcher) inside(path string) (string, error) {
	if lw.AllowSymlinksOutside {
		return path, nil
	}
	if lw.realDir == "" {
		dir, err := filepath.EvalSymlinks(lw.dir)
		if err != nil {
			return "", fmt.Errorf("%w: %w", ErrUnreadable, err)
		}
		lw.realDir = dir
	}
	dir := lw.realDir
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		return "", fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if rel, err := filepath.Rel(dir, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: %s leads to %s (Config.AllowSymlinksOutside allows it)", ErrOutsideDir, filepath.Base(path), real)
	}
	return real, nil
}

// opened checks that the file opened at path, whose stat is fi, is the
// one path leads to now, inside the directory: a link changed between
// the check before the open and the open itself (to a file outside, and
// back) shows as another file (errReplaced), as does a file an editor
// renamed into place meanwhile, which read reads again.
func (lw *ListerWatcher) opened(path string, fi fs.FileInfo) error {
	if lw.AllowSymlinksOutside {
		return nil
	}
	real, err := lw.inside(path)
	if err != nil {
		return err
	}
	now, err := os.Stat(real)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrUnreadable, err)
	}
	if !os.SameFile(fi, now) {
		return errReplaced
	}
	return nil
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

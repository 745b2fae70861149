package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// The directory objects' operations. A directory is created by its own
// Update, never by a file's: with Config.DependsOn a file in it is
// written only once the directory's object is Done, and the directory's
// Delete waits until every file that was written in it is deleted, so
// the order is the reconciler's, not a side effect of MkdirAll.

// updateDir makes the directory d.Name exist with mode d.Mode. Like a
// file's Update it repairs drift: a directory removed or chmod-ed behind
// the program's back is restored at the next refresh (its files follow
// at theirs).
func (o *fileOps) updateDir(d *File) error {
	path := d.path(o.dir)
	info, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(o.dir, 0o755); err != nil {
			return err
		}
		if err := os.Mkdir(path, fs.FileMode(d.Mode)); err != nil {
			return err
		}
		o.log.Info("Created directory", "name", d.Name, "mode", d.Mode)
	case err != nil:
		return err
	case !info.IsDir():
		return fmt.Errorf("%s is not a directory; remove it so that the directory can be created", path)
	case info.Mode().Perm() == fs.FileMode(d.Mode):
		return nil
	}
	// Mkdir's mode is filtered by the umask; set it as asked.
	return os.Chmod(path, fs.FileMode(d.Mode))
}

// deleteDir removes the directory d.Name. The files the table put in it
// are gone by now: each file's Delete runs before its directory's. A
// directory that still holds something is not removed: the Delete fails,
// and is retried, until someone empties it (Prune removes the files
// nobody asked for while the directory is desired, not after).
func (o *fileOps) deleteDir(d *File) error {
	err := os.Remove(d.path(o.dir))
	switch {
	case err == nil:
		o.log.Info("Removed directory", "name", d.Name)
	case errors.Is(err, fs.ErrNotExist):
	case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST):
		return fmt.Errorf("directory %s is not empty: remove what is in it so that it can be removed", d.Name)
	default:
		return err
	}
	return nil
}

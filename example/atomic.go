package main

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// tempPrefix starts the names of temporary files. Desired names never
// start with a dot, so a temporary file is never mistaken for a desired
// one, and one left behind by a crash is pruned.
const tempPrefix = ".tmp-"

// writeFileAtomic replaces the file at path with data and mode so that a
// reader, or the file system after a crash, sees either the old file or
// the new one, never a part of it: it writes a temporary file in the same
// directory, flushes it to disk, renames it over path (atomic within a
// directory) and flushes the directory so that the rename itself is
// durable. On failure it removes the temporary file and path is unchanged.
func writeFileAtomic(path string, data []byte, mode fs.FileMode) (err error) {
	dir, name := filepath.Split(path)
	tmp, err := os.CreateTemp(dir, tempPrefix+name+"-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	// Chmod on the open file sets the mode exactly; the mode argument of
	// OpenFile would be masked by the umask.
	if err := tmp.Chmod(mode); err != nil {
		return err
	}
	// Without this Sync a crash soon after the rename can leave an empty
	// file under the new name on some file systems.
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// removeFile removes the file at path and flushes its directory. A file
// that is not there is not an error: removing is idempotent.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir flushes a directory's entries to disk, making renames and
// removals in it durable.
func syncDir(dir string) error {
	if dir == "" {
		dir = "."
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

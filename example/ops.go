package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// fileOps makes the state directory match the desired-files table. It
// implements reconciler.Operations; the reconciler calls it, never two
// operations for one file at once and never Prune beside Update or Delete.
//
// Every operation is idempotent: it looks at what is on disk and does only
// what is missing, so calling it again after a failure, a refresh or a
// restart is safe.
type fileOps struct {
	dir string
	log *slog.Logger
}

var _ reconciler.Operations[*File] = (*fileOps)(nil)

func newFileOps(cfg Config, log *slog.Logger) *fileOps {
	return &fileOps{dir: cfg.StateDir, log: log}
}

// Update makes the file f.Name hold f.Content with mode f.Mode. It is
// called for new and changed files (status Pending) and, at every full
// reconciliation, for files that are already Done (status Refreshing):
// that is how a file edited, chmod-ed or deleted behind our back is
// repaired. A file that already matches is left untouched, so a refresh
// costs one read per file.
func (o *fileOps) Update(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, f *File) error {
	if f.isDir() {
		return o.updateDir(f)
	}
	// A file in a directory is written only once the directory's object
	// is Done (Config.DependsOn): its directory is not created here.
	path := f.path(o.dir)
	drift, err := o.drift(path, f)
	if err != nil {
		// For example a directory where the file should be: the
		// reconciler retries with backoff and reports the error in
		// health until someone removes it.
		return err
	}
	if drift == "" {
		return nil
	}
	// The directory itself may have been removed behind our back.
	if err := os.MkdirAll(o.dir, 0o755); err != nil {
		return err
	}
	if err := writeFileAtomic(path, []byte(f.Content), fs.FileMode(f.Mode)); err != nil {
		return err
	}
	if f.Status.Kind == reconciler.StatusKindRefreshing {
		o.log.Info("Repaired drifted file", "name", f.Name, "drift", drift)
	} else {
		o.log.Info("Wrote file", "name", f.Name, "size", len(f.Content), "mode", f.Mode)
	}
	return nil
}

// drift says how the file at path differs from f ("" when it matches), or
// fails when the path holds something Update must not replace.
func (o *fileOps) drift(path string, f *File) (string, error) {
	info, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "missing", nil
	case err != nil:
		return "", err
	case info.IsDir():
		return "", fmt.Errorf("%s is a directory; remove it so that the file can be written", path)
	case !info.Mode().IsRegular():
		// A symlink, say: the rename replaces the link, not its target.
		return "not a regular file", nil
	case info.Mode().Perm() != fs.FileMode(f.Mode):
		return fmt.Sprintf("mode %s, want %s", FileMode(info.Mode().Perm()), f.Mode), nil
	case info.Size() != int64(len(f.Content)):
		return "content", nil
	}
	have, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if !bytes.Equal(have, []byte(f.Content)) {
		return "content", nil
	}
	return "", nil
}

// Delete removes the file of a deleted row. A file that is already gone is
// fine; a directory of that name is not ours and is left alone.
func (o *fileOps) Delete(ctx context.Context, _ statedb.ReadTxn, _ statedb.Revision, f *File) error {
	if f.isDir() {
		return o.deleteDir(f)
	}
	path := f.path(o.dir)
	if info, err := os.Lstat(path); err == nil && info.IsDir() {
		return nil
	}
	if err := removeFile(path); err != nil {
		return err
	}
	o.log.Info("Removed file", "name", f.Name)
	return nil
}

// Prune removes every regular file and symlink in the directory, and in
// its desired directories, that is not in objs, the full desired set:
// files dropped in by hand, files deleted from the table while the
// program was down, and temporary files left by a crash. A directory no
// longer desired is left alone: directories are not pruned. The reconciler calls it only once the table is initialized (the
// desired-state file is loaded), otherwise it would delete everything.
func (o *fileOps) Prune(ctx context.Context, _ statedb.ReadTxn, objs iter.Seq2[*File, statedb.Revision]) error {
	desired := map[string]bool{} // by path relative to the state directory
	var dirs []string
	for f := range objs {
		desired[filepath.Join(f.Dir, f.Name)] = true
		if f.isDir() {
			dirs = append(dirs, f.Name)
		}
	}
	var errs []error
	for _, dir := range append([]string{""}, dirs...) {
		if err := o.pruneIn(ctx, dir, desired); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// pruneIn removes what Prune removes from dir, a directory object's name
// ("" for the state directory itself).
func (o *fileOps) pruneIn(ctx context.Context, dir string, desired map[string]bool) error {
	entries, err := os.ReadDir(filepath.Join(o.dir, dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // nothing to prune; Update recreates the directory
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		name := filepath.Join(dir, e.Name())
		if desired[name] || !prunable(e.Type()) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := removeFile(filepath.Join(o.dir, name)); err != nil {
			errs = append(errs, err)
			continue
		}
		o.log.Info("Pruned unexpected file", "name", name)
	}
	return errors.Join(errs...)
}

// prunable reports whether Prune may remove a directory entry of type t:
// regular files and symlinks, which is what Update writes and what people
// drop in. Directories and special files are not ours.
func prunable(t fs.FileMode) bool {
	return t.IsRegular() || t&fs.ModeSymlink != 0
}

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// errLimit is wrapped by the error of a PUT that would take the API's
// files over --max-files or --max-total-bytes: the API answers 403.
var errLimit = errors.New("limit reached")

// desiredState is the desired set of files, for the API: it reads the
// desired-files table and is its only writer besides the reconciler (which
// writes statuses). Every change is saved before it goes into the table,
// one file per desired file (specDir), so that a restart keeps the
// desired set; the desired-state file (a desiredFile) says which state
// directory they are for and where they are. At start they are loaded
// into the table.
//
// The API's changes are serialized by mu, not by the table's write lock:
// a change is saved (one small file) under mu, and only then is the
// table locked, for the insert or delete alone, so that saving never
// holds up the reconciler's status writes.
type desiredState struct {
	log   *slog.Logger
	db    *statedb.DB
	files statedb.RWTable[*File]
	path  string
	dir   string // --state-dir as given
	abs   string // its absolute path, recorded in the desired-state file

	maxFiles int
	maxBytes int64

	mu    sync.Mutex
	specs specDir // set by load
	count int     // the API's files in the table
	bytes int64   // and their content, in bytes

	// beforeSave, when set (by tests), runs before a change is saved.
	beforeSave func(name string)
}

// newDesiredState registers the table initializer and the start hook that
// loads the desired-state file.
//
// The initializer is what makes pruning safe: the reconciler does not run
// Prune until every initializer of the table is done, so an empty table at
// start (before the file is loaded) never looks like "delete every file".
// Initializers must be registered before the hive starts, hence here in
// the constructor; the start hook marks it done in the same transaction
// that inserts the loaded files.
func newDesiredState(lc cell.Lifecycle, log *slog.Logger, db *statedb.DB, files statedb.RWTable[*File], cfg Config) (*desiredState, error) {
	abs, err := absStateDir(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	d := &desiredState{log: log, db: db, files: files, path: cfg.DesiredFile, dir: cfg.StateDir, abs: abs,
		maxFiles: cfg.MaxFiles, maxBytes: cfg.MaxTotalBytes}
	wtxn := db.WriteTxn(files)
	loaded := files.RegisterInitializer(wtxn, "desired-file")
	wtxn.Commit()
	lc.Append(cell.Hook{OnStart: func(cell.HookContext) error { return d.load(loaded) }})
	return d, nil
}

// load reads the desired files into the table, every file Pending, and
// marks the table initialized. It refuses to start when the first full
// reconciliation could delete the files of a directory the desired set is
// not for (a mistyped --state-dir should not wipe a directory): when the
// desired-state file is for another state directory, or when there is no
// such file (an empty desired set) but the state directory already holds
// files. A desired-state file of an older version, which held the files
// themselves, is converted.
func (d *desiredState) load(markInitialized func(statedb.WriteTxn)) error {
	desired, err := readDesiredFile(d.path)
	if err == nil {
		err = checkStateDir(d.path, desired.StateDir, d.abs)
	}
	if errors.Is(err, fs.ErrNotExist) {
		if entries, _ := os.ReadDir(d.dir); len(entries) > 0 {
			return fmt.Errorf("state directory %s is not empty and there is no desired-state file %s: "+
				"refusing to start, as the first full reconciliation would delete its files; "+
				"use a new or empty --state-dir", d.dir, d.path)
		}
		// Record the (empty) desired set for this state directory now:
		// the manifests of --desired-dir fill the state directory too,
		// and a restart must find the file that says whose it is.
		desired, err = desiredFile{StateDir: d.abs}, nil
	}
	if err != nil {
		return err
	}
	if err := d.openSpecs(desired); err != nil {
		return err
	}
	specs, err := d.specs.read()
	if err != nil {
		return err
	}
	wtxn := d.db.WriteTxn(d.files)
	defer wtxn.Abort()
	for _, spec := range specs {
		if _, _, err := d.files.Insert(wtxn, &File{FileSpec: spec, Status: reconciler.StatusPending()}); err != nil {
			return err
		}
		d.count++
		d.bytes += int64(len(spec.Content))
	}
	markInitialized(wtxn)
	wtxn.Commit()
	d.log.Info("Loaded desired files", "count", len(specs), "from", string(d.specs))
	return nil
}

// openSpecs sets the directory of the desired files from the
// desired-state file, writing the file when it is new or of an older
// version (whose files it first saves in the directory).
func (d *desiredState) openSpecs(desired desiredFile) error {
	if desired.FilesDir != "" {
		if desired.FilesDir != filepath.Base(desired.FilesDir) || desired.FilesDir == ".." || desired.FilesDir == "." {
			return fmt.Errorf("desired-state file %s: files_dir %q must be a name beside it", d.path, desired.FilesDir)
		}
		d.specs = specDir(filepath.Join(filepath.Dir(d.path), desired.FilesDir))
	} else {
		d.specs = specDir(defaultSpecDir(d.path))
	}
	if abs, err := filepath.Abs(string(d.specs)); err == nil && sameDir(abs, d.abs) {
		return fmt.Errorf("the desired files' directory %s must not be --state-dir %s", d.specs, d.dir)
	}
	if desired.FilesDir != "" && desired.Files == nil {
		return nil
	}
	for _, spec := range desired.Files {
		if err := d.specs.write(spec); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(string(d.specs), 0o700); err != nil {
		return err
	}
	header := desiredFile{StateDir: d.abs, FilesDir: filepath.Base(string(d.specs))}
	data, err := json.MarshalIndent(header, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(d.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save desired-state file: %w", err)
	}
	return nil
}

// List returns every desired file with its status, sorted by name.
func (d *desiredState) List() []*File {
	files := []*File{}
	for f := range d.files.All(d.db.ReadTxn()) {
		files = append(files, f)
	}
	return files
}

// Get returns the named desired file with its status.
func (d *desiredState) Get(name string) (*File, bool) {
	f, _, found := d.files.Get(d.db.ReadTxn(), nameIndex.Query(name))
	return f, found
}

// Put makes spec desired: it saves it and inserts it into the table,
// Pending. It returns the file as stored and whether it is new. Putting
// what is already desired changes nothing, unless the file is in Error:
// then it is tried again at once instead of at its next retry. A file
// that would take the API's files over --max-files or --max-total-bytes
// is refused (errLimit). spec must be valid (FileSpec.validate).
func (d *desiredState) Put(spec FileSpec) (f *File, created bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, _, found := d.files.Get(d.db.ReadTxn(), nameIndex.Query(spec.Name))
	if found && old.Origin != "" {
		return nil, false, fmt.Errorf("%w: %q comes from %s", errNotAPIFile, spec.Name, old.Origin)
	}
	if found && old.FileSpec == spec && old.Status.Kind != reconciler.StatusKindError {
		return old, false, nil
	}
	count, size := d.count, d.bytes+int64(len(spec.Content))
	if found {
		size -= int64(len(old.Content))
	} else {
		count++
	}
	if err := d.checkLimits(count, size); err != nil {
		return nil, false, err
	}
	if !found || old.FileSpec != spec {
		if d.beforeSave != nil {
			d.beforeSave(spec.Name)
		}
		if err := d.specs.write(spec); err != nil {
			return nil, false, err
		}
	}
	wtxn := d.db.WriteTxn(d.files)
	defer wtxn.Abort()
	// Only the API writes the API's rows (a source never takes a row it
	// does not own), but a manifest may have taken a name that was free.
	if cur, _, taken := d.files.Get(wtxn, nameIndex.Query(spec.Name)); taken && cur.Origin != "" {
		wtxn.Abort()
		d.undo(spec.Name, old, found)
		return nil, false, fmt.Errorf("%w: %q comes from %s", errNotAPIFile, spec.Name, cur.Origin)
	}
	f = &File{FileSpec: spec, Status: reconciler.StatusPending()}
	if _, _, err := d.files.Insert(wtxn, f); err != nil {
		wtxn.Abort()
		d.undo(spec.Name, old, found)
		return nil, false, err
	}
	wtxn.Commit()
	d.count, d.bytes = count, size
	return f, !found, nil
}

// checkLimits refuses a desired set of the API of count files and size
// bytes of content over the configured limits.
func (d *desiredState) checkLimits(count int, size int64) error {
	switch {
	case count > d.maxFiles:
		return fmt.Errorf("%w: the API already desires %d files, the limit (--max-files)", errLimit, d.maxFiles)
	case size > d.maxBytes:
		return fmt.Errorf("%w: the API's files would hold %d bytes, over the limit of %d (--max-total-bytes)", errLimit, size, d.maxBytes)
	}
	return nil
}

// undo puts back the saved spec of name as it was before a Put that did
// not reach the table.
func (d *desiredState) undo(name string, old *File, found bool) {
	var err error
	if found {
		err = d.specs.write(old.FileSpec)
	} else {
		err = d.specs.remove(name)
	}
	if err != nil {
		d.log.Error("Could not undo the save of a refused change: the file is desired again after a restart", "name", name, "error", err)
	}
}

// Delete makes the named file undesired: it removes its saved spec and
// deletes it from the table. The reconciler then removes the file from
// the directory. It reports whether the file was desired.
func (d *desiredState) Delete(name string) (found bool, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	old, _, found := d.files.Get(d.db.ReadTxn(), nameIndex.Query(name))
	if !found {
		return false, nil
	}
	if old.Origin != "" {
		return true, fmt.Errorf("%w: %q comes from %s", errNotAPIFile, name, old.Origin)
	}
	if d.beforeSave != nil {
		d.beforeSave(name)
	}
	if err := d.specs.remove(name); err != nil {
		return false, err
	}
	wtxn := d.db.WriteTxn(d.files)
	defer wtxn.Abort()
	if _, _, err := d.files.Delete(wtxn, old); err != nil {
		d.undo(name, old, true)
		return false, err
	}
	wtxn.Commit()
	d.count--
	d.bytes -= int64(len(old.Content))
	return true, nil
}

// readDesiredFile reads and validates a desired-state file. A file that
// does not parse or holds an invalid or repeated entry (older versions
// kept the files in it) is an error: better to refuse to start than to
// prune files because of a typo. A bare list of FileSpecs (what the
// oldest versions wrote) is read with no StateDir, which checkStateDir
// refuses.
func readDesiredFile(path string) (desiredFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return desiredFile{}, err
	}
	var desired desiredFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '[' {
		err = dec.Decode(&desired.Files)
	} else {
		err = dec.Decode(&desired)
	}
	if err != nil {
		return desiredFile{}, fmt.Errorf("desired-state file %s: %w", path, err)
	}
	seen := map[string]bool{}
	for _, spec := range desired.Files {
		if err := spec.validate(); err != nil {
			return desiredFile{}, fmt.Errorf("desired-state file %s: %w", path, err)
		}
		if seen[spec.Name] {
			return desiredFile{}, fmt.Errorf("desired-state file %s: %q appears twice", path, spec.Name)
		}
		seen[spec.Name] = true
	}
	return desired, nil
}

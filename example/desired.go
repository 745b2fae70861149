package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"

	"github.com/cilium/hive/cell"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// desiredState is the desired set of files, for the API: it reads the
// desired-files table and is its only writer besides the reconciler (which
// writes statuses). Every change goes into the table and into the
// desired-state file (a desiredFile: the FileSpecs and the state
// directory they are for) together, so that a restart keeps the desired
// set. At start the file is loaded into the table.
type desiredState struct {
	log   *slog.Logger
	db    *statedb.DB
	files statedb.RWTable[*File]
	path  string
	dir   string // --state-dir as given
	abs   string // its absolute path, recorded in the desired-state file
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
	d := &desiredState{log: log, db: db, files: files, path: cfg.DesiredFile, dir: cfg.StateDir, abs: abs}
	wtxn := db.WriteTxn(files)
	loaded := files.RegisterInitializer(wtxn, "desired-file")
	wtxn.Commit()
	lc.Append(cell.Hook{OnStart: func(cell.HookContext) error { return d.load(loaded) }})
	return d, nil
}

// load reads the desired-state file into the table, every file Pending, and
// marks the table initialized. It refuses to start when the first full
// reconciliation could delete the files of a directory the desired set is
// not for (a mistyped --state-dir should not wipe a directory): when the
// file is for another state directory, or when there is no file (an empty
// desired set) but the state directory already holds files.
func (d *desiredState) load(markInitialized func(statedb.WriteTxn)) error {
	desired, err := readDesiredFile(d.path)
	if err == nil {
		err = checkStateDir(d.path, desired.StateDir, d.abs)
	}
	specs := desired.Files
	if errors.Is(err, fs.ErrNotExist) {
		if entries, _ := os.ReadDir(d.dir); len(entries) > 0 {
			return fmt.Errorf("state directory %s is not empty and there is no desired-state file %s: "+
				"refusing to start, as the first full reconciliation would delete its files; "+
				"use a new or empty --state-dir", d.dir, d.path)
		}
		specs, err = nil, nil
		// Record the (empty) desired set for this state directory now:
		// the manifests of --desired-dir fill the state directory too,
		// and a restart must find the file that says whose it is.
		if err := d.save(d.db.ReadTxn()); err != nil {
			return err
		}
	}
	if err != nil {
		return err
	}
	wtxn := d.db.WriteTxn(d.files)
	defer wtxn.Abort()
	for _, spec := range specs {
		if _, _, err := d.files.Insert(wtxn, &File{FileSpec: spec, Status: reconciler.StatusPending()}); err != nil {
			return err
		}
	}
	markInitialized(wtxn)
	wtxn.Commit()
	d.log.Info("Loaded desired files", "count", len(specs), "from", d.path)
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

// Put makes spec desired: it inserts it into the table, Pending, and saves
// the desired-state file. It returns the file as stored and whether it is
// new. Putting what is already desired changes nothing, unless the file is
// in Error: then it is tried again at once instead of at its next retry.
// spec must be valid (FileSpec.validate).
func (d *desiredState) Put(spec FileSpec) (f *File, created bool, err error) {
	// The write transaction locks the table until Commit or Abort, so the
	// file is saved in the same order as the changes are made, and if
	// saving fails the table is left as it was. Saving under the lock
	// holds up the reconciler's status writes for a millisecond or so:
	// fine at the rate people PUT files.
	wtxn := d.db.WriteTxn(d.files)
	defer wtxn.Abort()
	old, _, found := d.files.Get(wtxn, nameIndex.Query(spec.Name))
	if found && old.Origin != "" {
		return nil, false, fmt.Errorf("%w: %q comes from %s", errNotAPIFile, spec.Name, old.Origin)
	}
	if found && old.FileSpec == spec && old.Status.Kind != reconciler.StatusKindError {
		return old, false, nil
	}
	f = &File{FileSpec: spec, Status: reconciler.StatusPending()}
	if _, _, err := d.files.Insert(wtxn, f); err != nil {
		return nil, false, err
	}
	if err := d.save(wtxn); err != nil {
		return nil, false, err
	}
	wtxn.Commit()
	return f, !found, nil
}

// Delete makes the named file undesired: it deletes it from the table and
// saves the desired-state file. The reconciler then removes the file from
// the directory. It reports whether the file was desired.
func (d *desiredState) Delete(name string) (found bool, err error) {
	wtxn := d.db.WriteTxn(d.files)
	defer wtxn.Abort()
	old, _, found := d.files.Get(wtxn, nameIndex.Query(name))
	if !found {
		return false, nil
	}
	if old.Origin != "" {
		return true, fmt.Errorf("%w: %q comes from %s", errNotAPIFile, name, old.Origin)
	}
	if _, _, err := d.files.Delete(wtxn, old); err != nil {
		return false, err
	}
	if err := d.save(wtxn); err != nil {
		return false, err
	}
	wtxn.Commit()
	return true, nil
}

// save writes the table as seen by txn to the desired-state file,
// atomically: a crash leaves the previous version or this one.
func (d *desiredState) save(txn statedb.ReadTxn) error {
	specs := []FileSpec{}
	for f := range d.files.All(txn) {
		if f.Origin == "" { // the manifests are saved where they come from
			specs = append(specs, f.FileSpec)
		}
	}
	data, err := json.MarshalIndent(desiredFile{StateDir: d.abs, Files: specs}, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(d.path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("save desired files: %w", err)
	}
	return nil
}

// readDesiredFile reads and validates a desired-state file. A file that
// does not parse or holds an invalid or repeated entry is an error: better
// to refuse to start than to prune files because of a typo. A bare list of
// FileSpecs (what older versions wrote) is read with no StateDir, which
// checkStateDir refuses.
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

package main

import (
	"fmt"
	"path/filepath"
)

// desiredFile is what the desired-state file holds: the desired files,
// and the state directory they are for.
//
// The state directory is recorded because the file alone does not say
// which directory it describes, and pruning deletes whatever the file does
// not list: a desired-state file left in the working directory and a
// mistyped --state-dir would otherwise make the agent delete the files of
// an unrelated directory. With it, the agent refuses to start on any other
// directory (see checkStateDir).
type desiredFile struct {
	// StateDir is the absolute path of the state directory.
	StateDir string `json:"state_dir"`
	// FilesDir is the directory of the desired files (specDir), a name
	// beside this file. Older versions kept the files in Files instead;
	// they refuse to start on a file that has FilesDir.
	FilesDir string     `json:"files_dir,omitempty"`
	Files    []FileSpec `json:"files,omitempty"`
}

// absStateDir returns the absolute, clean path of a --state-dir, the form
// it is recorded in.
func absStateDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("--state-dir %s: %w", dir, err)
	}
	return abs, nil
}

// checkStateDir fails unless the desired-state file at path, recorded for
// the directory recorded, is for stateDir (absolute): the same path, or
// two paths that lead to the same directory through symbolic links.
func checkStateDir(path, recorded, stateDir string) error {
	switch {
	case recorded == "":
		return fmt.Errorf("desired-state file %s does not say which state directory it is for "+
			"(no \"state_dir\", or a bare list of an older version): refusing to start, as the first "+
			"full reconciliation would delete the files of --state-dir %s that it does not list; "+
			"if it is that directory's, make it {\"state_dir\": %q, \"files\": [...]}", path, stateDir, stateDir)
	case sameDir(recorded, stateDir):
		return nil
	}
	return fmt.Errorf("desired-state file %s is for state directory %s, not --state-dir %s: "+
		"refusing to start, as the first full reconciliation would delete the files of %s that it does not list; "+
		"give --state-dir %s, or a --desired-file of %s's own (a new one for a new or empty directory)",
		path, recorded, stateDir, stateDir, recorded, stateDir)
}

// sameDir reports whether the absolute paths a and b name the same
// directory: the same path, or the same once symbolic links are resolved
// (a path that does not exist is compared as it is).
func sameDir(a, b string) bool {
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"strconv"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	convergeindex "github.com/converge-go/converge/index"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// MaxContentSize is the largest content a desired file may have. The whole
// table lives in memory, so keep files small.
const MaxContentSize = 1 << 20

// DefaultMode is the mode of a file whose PUT gives none.
const DefaultMode FileMode = 0o644

// FileSpec is what a user asks for: a file's name, content and mode. It is
// what PUT takes (the name from the URL) and what the desired-state file
// holds.
//
// A spec is a file unless Kind is KindDir: then it is a directory of the
// state directory, named Name, and a file whose Dir names it is written
// in it. A file in a directory depends on the directory's object
// (Config.DependsOn, reconcile.go): the directory is created before the
// file is written, and removed only after the file is. Directories come
// from manifests (--desired-dir); the API's files are top-level.
type FileSpec struct {
	Name    string   `json:"name"`
	Content string   `json:"content"`
	Mode    FileMode `json:"mode"`
	Kind    string   `json:"kind,omitempty"` // "" (a file) or KindDir
	Dir     string   `json:"dir,omitempty"`  // a file's directory object; "" for the state directory itself
}

// KindDir is FileSpec.Kind of a directory.
const KindDir = "dir"

// DefaultDirMode is the mode of a directory whose manifest gives none.
const DefaultDirMode FileMode = 0o755

// isDir reports whether the spec is a directory.
func (s FileSpec) isDir() bool { return s.Kind == KindDir }

// path is where the spec lives under the state directory dir.
func (s FileSpec) path(dir string) string { return filepath.Join(dir, s.Dir, s.Name) }

// dependsOn is the reconciler's Config.DependsOn: a file in a directory
// needs the directory's object, by its primary key (the name index's
// index.String).
func dependsOn(f *File) []index.Key {
	if f.Dir == "" {
		return nil
	}
	return []index.Key{index.String(f.Dir)}
}

// File is one row of the desired-files table: a FileSpec and the status of
// its reconciliation. Objects in a statedb table are immutable: change a
// clone (Clone) and insert that.
type File struct {
	FileSpec
	// Origin is who desires the file: "" for the HTTP API, "manifests"
	// for the --desired-dir source. Each writes and deletes only its own.
	Origin string            `json:"origin,omitempty"`
	Status reconciler.Status `json:"status"`
}

// Clone returns a shallow copy of f; the reconciler clones with it before
// setting a status.
func (f *File) Clone() *File {
	c := *f
	return &c
}

// getStatus and setStatus are the reconciler's view of the status field.
func getStatus(f *File) reconciler.Status { return f.Status }

func setStatus(f *File, s reconciler.Status) *File {
	f.Status = s // f is already a clone
	return f
}

// TableHeader and TableRow make the table printable by statedb's "db/show"
// script command ("go run ./example shell db/show desired-files").
func (f *File) TableHeader() []string {
	return []string{"Name", "Mode", "Size", "Status"}
}

// TableRow implements statedb.TableWritable.
func (f *File) TableRow() []string {
	return []string{f.Name, f.Mode.String(), strconv.Itoa(len(f.Content)), f.Status.Row()}
}

// filesTableName is the table's name in the database and in db/show.
const filesTableName = "desired-files"

// nameIndex is the primary index: one file per name.
var nameIndex = statedb.Index[*File, string]{
	Name: "name",
	FromObject: func(f *File) index.KeySet {
		return index.NewKeySet(index.String(f.Name))
	},
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// statusIndex finds files by the kind of their status, for example every
// file in Error. reconciler.WaitForReconciliation uses it too.
var statusIndex = convergeindex.NewStatusIndex("status", getStatus)

// newFilesTable registers the desired-files table with the database.
func newFilesTable(db *statedb.DB) (statedb.RWTable[*File], error) {
	return statedb.NewTable(db, filesTableName, nameIndex, statusIndex)
}

// validName is what a desired file may be called: no path separators, no
// "..", and no leading dot, so names can never reach outside the state
// directory nor clash with the temporary files of atomic writes.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// errInvalidFile is wrapped by every error of validate: the API answers it
// with 400 Bad Request.
var errInvalidFile = errors.New("invalid file")

// errTooLarge is wrapped by the error of validate for oversized content:
// the API answers it with 413 Content Too Large.
var errTooLarge = errors.New("content too large")

// validate checks a spec from a user or from the desired-state file.
func (s FileSpec) validate() error {
	switch {
	case !validName.MatchString(s.Name):
		return fmt.Errorf("%w: name %s: want 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit",
			errInvalidFile, source.Quote(s.Name))
	case len(s.Content) > MaxContentSize:
		return fmt.Errorf("%w: %s has %d bytes of content, the limit is %d", errTooLarge, s.Name, len(s.Content), MaxContentSize)
	case s.Kind != "" && s.Kind != KindDir:
		return fmt.Errorf("%w: %s: kind %s: want %q or none (a file)", errInvalidFile, s.Name, source.Quote(s.Kind), KindDir)
	case s.Dir != "" && !validName.MatchString(s.Dir):
		return fmt.Errorf("%w: %s: dir %s: want the name of a directory object", errInvalidFile, s.Name, source.Quote(s.Dir))
	case s.Dir == s.Name:
		return fmt.Errorf("%w: %s is in itself", errInvalidFile, s.Name)
	case s.isDir():
		return s.validateDir()
	}
	return s.Mode.validate()
}

// validateDir checks a directory's spec: one level (no Dir), no content,
// and a mode that lets the owner list, create and remove its files.
func (s FileSpec) validateDir() error {
	switch {
	case s.Dir != "":
		return fmt.Errorf("%w: directory %s: directories are not nested (no dir)", errInvalidFile, s.Name)
	case s.Content != "":
		return fmt.Errorf("%w: directory %s has content", errInvalidFile, s.Name)
	case s.Mode > 0o777 || s.Mode&0o700 != 0o700:
		return fmt.Errorf("%w: directory %s: mode %s: want permission bits that give the owner rwx (0700), such as 0755", errInvalidFile, s.Name, s.Mode)
	}
	return nil
}

// FileMode is a file's permission bits. In JSON it is an octal string such
// as "0644", the way people write modes.
type FileMode fs.FileMode

// String returns the mode in octal with a leading zero: "0644".
func (m FileMode) String() string { return fmt.Sprintf("%04o", uint32(m)) }

// MarshalText implements encoding.TextMarshaler.
func (m FileMode) MarshalText() ([]byte, error) { return []byte(m.String()), nil }

// UnmarshalText parses an octal mode such as "0644" or "600".
func (m *FileMode) UnmarshalText(text []byte) error {
	v, err := strconv.ParseUint(string(text), 8, 32)
	if err != nil {
		return fmt.Errorf("%w: mode %s: want octal permission bits such as \"0644\"", errInvalidFile, source.Quote(string(text)))
	}
	*m = FileMode(v)
	return nil
}

// validate accepts permission bits only, and only modes that let the
// owner (this program) read the file back and write it: Update compares
// the file with the desired content on every refresh.
func (m FileMode) validate() error {
	switch {
	case m > 0o777:
		return fmt.Errorf("%w: mode %s: only permission bits (at most 0777) are allowed", errInvalidFile, m)
	case m&0o600 != 0o600:
		return fmt.Errorf("%w: mode %s: the owner must be able to read and write (0600)", errInvalidFile, m)
	}
	return nil
}

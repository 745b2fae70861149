package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-go/converge/k8s/k8ssource"
	"github.com/converge-go/converge/reconciler"
)

// File is one row of the desired-files table, made from one DesiredFile.
type File struct {
	Key        string // namespace/name of the DesiredFile
	Path       string // spec.path: the file's name in the directory
	Content    string // spec.content
	Generation int64  // the DesiredFile's metadata.generation
	Status     reconciler.Status
}

// TableHeader and TableRow make the table printable by db/show.
func (f *File) TableHeader() []string { return []string{"Key", "Path", "Generation", "Status"} }

// TableRow implements statedb.TableWritable.
func (f *File) TableRow() []string {
	return []string{f.Key, f.Path, fmt.Sprint(f.Generation), f.Status.Kind.String()}
}

var keyIndex = statedb.Index[*File, string]{
	Name:       "key",
	FromObject: func(f *File) index.KeySet { return index.NewKeySet(index.String(f.Key)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// errBadPath is the Transform error of a spec.path that is not a plain
// file name.
var errBadPath = errors.New("spec.path must be a plain file name (no '/', not '.' or '..', not empty)")

// fromDesiredFile is the source's Transform: one DesiredFile, one File.
func fromDesiredFile(u *unstructured.Unstructured) ([]*File, error) {
	path, _, _ := unstructured.NestedString(u.Object, "spec", "path")
	content, _, _ := unstructured.NestedString(u.Object, "spec", "content")
	if path == "" || path == "." || path == ".." || strings.ContainsRune(path, '/') || strings.HasPrefix(path, ".") {
		return nil, fmt.Errorf("%q: %w", path, errBadPath)
	}
	return []*File{{Key: k8ssource.Key(u), Path: path, Content: content, Generation: u.GetGeneration()}}, nil
}

func equalFiles(a, b *File) bool {
	return a.Key == b.Key && a.Path == b.Path && a.Content == b.Content && a.Generation == b.Generation
}

// fileOps writes the files into dir: the reconciler's Operations.
type fileOps struct{ dir string }

func (o fileOps) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, f *File) error {
	tmp := filepath.Join(o.dir, ".tmp-"+f.Path)
	if err := os.WriteFile(tmp, []byte(f.Content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(o.dir, f.Path))
}

func (o fileOps) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, f *File) error {
	if err := os.Remove(filepath.Join(o.dir, f.Path)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Prune removes the files of dir that no DesiredFile asks for.
func (o fileOps) Prune(_ context.Context, _ statedb.ReadTxn, files iter.Seq2[*File, statedb.Revision]) error {
	want := map[string]bool{}
	for f := range files {
		want[f.Path] = true
	}
	entries, err := os.ReadDir(o.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Type().IsRegular() && !want[e.Name()] {
			if err := os.Remove(filepath.Join(o.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

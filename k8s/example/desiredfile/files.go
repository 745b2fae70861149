package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/converge-go/converge/k8s/k8ssource"
	"github.com/converge-go/converge/reconciler"
)

// File is one row of the desired-files table, made from one DesiredFile:
// the file Path in the directory of its Namespace. It is keyed by the
// file, so that two DesiredFiles of one namespace that ask for one path
// ask for one row: the first holds it, the other is refused with a
// Conflict condition naming it (k8ssource's claims), and a Delete only
// ever removes the file of the object that holds it.
type File struct {
	Key        string // the file: namespace/path
	Namespace  string // the DesiredFile's namespace: the file's directory
	Name       string // the DesiredFile's name
	Path       string // spec.path: the file's name in its directory
	Content    string // spec.content
	Generation int64  // the DesiredFile's metadata.generation
	Status     reconciler.Status
}

// TableHeader and TableRow make the table printable by db/show.
func (f *File) TableHeader() []string { return []string{"File", "DesiredFile", "Generation", "Status"} }

// TableRow implements statedb.TableWritable.
func (f *File) TableRow() []string {
	return []string{f.Key, f.Namespace + "/" + f.Name, fmt.Sprint(f.Generation), f.Status.Kind.String()}
}

// file is the file's path relative to the agent's directory.
func (f *File) file() string { return path.Join(f.Namespace, f.Path) }

var keyIndex = statedb.Index[*File, string]{
	Name:       "key",
	FromObject: func(f *File) index.KeySet { return index.NewKeySet(index.String(f.Key)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

// errBadPath is the Transform error of a spec.path that is not a plain
// file name.
var errBadPath = errors.New("spec.path must be a plain file name (no '/', not starting with '.', not empty, at most 255 bytes)")

// maxPath is the longest file name a file system takes (NAME_MAX): a
// longer spec.path could never be written. The CRD's schema has
// maxLength 255 too, but counts characters, not bytes.
const maxPath = 255

// fromDesiredFile is the source's Transform: one DesiredFile, one File.
func fromDesiredFile(u *unstructured.Unstructured) ([]*File, error) {
	p, _, _ := unstructured.NestedString(u.Object, "spec", "path")
	content, _, _ := unstructured.NestedString(u.Object, "spec", "content")
	if p == "" || len(p) > maxPath || strings.ContainsRune(p, '/') || strings.HasPrefix(p, ".") {
		// Quote keeps a short prefix: the condition is readable by
		// anyone who can read the object.
		return nil, fmt.Errorf("%s: %w", k8ssource.Quote(p), errBadPath)
	}
	return []*File{{
		Key:       u.GetNamespace() + "/" + p,
		Namespace: u.GetNamespace(), Name: u.GetName(),
		Path: p, Content: content, Generation: u.GetGeneration(),
	}}, nil
}

func equalFiles(a, b *File) bool {
	return a.Key == b.Key && a.Namespace == b.Namespace && a.Name == b.Name && a.Path == b.Path && a.Content == b.Content && a.Generation == b.Generation
}

// fileOps keeps the files in dir, one directory per namespace, so that
// two namespaces never write the same file: the reconciler's Operations.
// Every access goes through an os.Root of dir, which refuses a path that
// a symbolic link would lead out of it.
type fileOps struct{ dir string }

func (o fileOps) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, f *File) error {
	root, err := os.OpenRoot(o.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Mkdir(f.Namespace, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	tmp, name, err := createTemp(root, f.Namespace, f.Path)
	if err != nil {
		return err
	}
	_, werr := tmp.WriteString(f.Content)
	if err := errors.Join(werr, tmp.Close()); err != nil {
		root.Remove(name)
		return err
	}
	return root.Rename(name, f.file())
}

// createTemp creates a new file beside dir/name, of a random name that
// starts with ".tmp-", and returns it with its name. It is created with
// O_EXCL: whatever sits at that name already, a symbolic link included,
// is never opened.
func createTemp(root *os.Root, dir, name string) (*os.File, string, error) {
	for range 10 {
		var b [8]byte
		rand.Read(b[:])
		tmp := path.Join(dir, ".tmp-"+name+"-"+hex.EncodeToString(b[:]))
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			return f, tmp, err
		}
	}
	return nil, "", fmt.Errorf("no free temporary name beside %s", path.Join(dir, name))
}

func (o fileOps) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, f *File) error {
	root, err := os.OpenRoot(o.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	// A name too long for the file system names no file: nothing to
	// remove, so that an object whose Update could never succeed can
	// still be deleted.
	if err := root.Remove(f.file()); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENAMETOOLONG) {
		return err
	}
	return nil
}

// Prune removes the files of the namespaces' directories that no
// DesiredFile asks for (left-over temporary files included).
func (o fileOps) Prune(_ context.Context, _ statedb.ReadTxn, files iter.Seq2[*File, statedb.Revision]) error {
	want := map[string]bool{}
	for f := range files {
		want[f.file()] = true
	}
	root, err := os.OpenRoot(o.dir)
	if err != nil {
		return err
	}
	defer root.Close()
	namespaces, err := fs.ReadDir(root.FS(), ".")
	if err != nil {
		return err
	}
	var errs []error
	for _, ns := range namespaces {
		if !ns.IsDir() {
			continue
		}
		entries, err := fs.ReadDir(root.FS(), ns.Name())
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			name := path.Join(ns.Name(), e.Name())
			if e.Type().IsRegular() && !want[name] {
				if err := root.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, err)
				}
			}
		}
	}
	return errors.Join(errs...)
}

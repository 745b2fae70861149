package main

import (
	"context"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"

	"github.com/converge-go/converge/reconciler"
)

// File is a desired file: its name in the directory and its content.
type File struct {
	Name    string
	Content string
	Status  reconciler.Status
}

func (f *File) clone() *File { c := *f; return &c }

// TableHeader and TableRow show the table in the shell's db commands.
func (f *File) TableHeader() []string { return []string{"Name", "Status"} }

// TableRow implements statedb.TableWritable.
func (f *File) TableRow() []string { return []string{f.Name, f.Status.Kind.String()} }

var fileByName = statedb.Index[*File, string]{
	Name:       "name",
	FromObject: func(f *File) index.KeySet { return index.NewKeySet(index.String(f.Name)) },
	FromKey:    index.String,
	Unique:     true,
}

// validName accepts a plain file name: no separators, no dot files.
func validName(name string) bool {
	return name != "" && len(name) <= 255 && !strings.ContainsAny(name, `/\`) && !strings.HasPrefix(name, ".")
}

// dirOps writes the desired files into dir.
type dirOps struct{ dir string }

// Update writes f atomically: a temporary file renamed over it.
func (o *dirOps) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, f *File) error {
	tmp, err := os.CreateTemp(o.dir, ".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(f.Content); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(o.dir, f.Name))
}

// Delete removes f; one already gone is deleted.
func (o *dirOps) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, f *File) error {
	if err := os.Remove(filepath.Join(o.dir, f.Name)); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// Prune removes the files nobody desires.
func (o *dirOps) Prune(_ context.Context, _ statedb.ReadTxn, objs iter.Seq2[*File, statedb.Revision]) error {
	desired := map[string]bool{}
	for f := range objs {
		desired[f.Name] = true
	}
	entries, err := os.ReadDir(o.dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() && !desired[e.Name()] && !strings.HasPrefix(e.Name(), ".") {
			if err := os.Remove(filepath.Join(o.dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

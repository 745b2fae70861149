package main

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"strings"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// noteOps is the target: a directory with one file per note.
type noteOps struct {
	dir string
}

// Update writes the note's file. A name that can never be a file name
// fails for good (Permanent): retrying would not help, changing the note
// will. Anything else is retried with backoff.
func (o *noteOps) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, n *Note) error {
	if n.Name == "" || strings.ContainsAny(n.Name, `/\`) || strings.HasPrefix(n.Name, ".") {
		return reconciler.Permanent(fmt.Errorf("%q is not a plain file name", n.Name))
	}
	path := filepath.Join(o.dir, n.Name)
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory: remove it so that the note can be written", n.Name)
	}
	return os.WriteFile(path, []byte(n.Text), 0o644)
}

// Delete removes the note's file. A file that is already gone is not an
// error: operations are called again after failures and restarts.
func (o *noteOps) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, n *Note) error {
	err := os.Remove(filepath.Join(o.dir, n.Name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Prune removes every regular file that no note asks for: files left by
// an earlier run, or put there by hand. It is given the whole desired set.
func (o *noteOps) Prune(_ context.Context, _ statedb.ReadTxn, notes iter.Seq2[*Note, statedb.Revision]) error {
	desired := map[string]bool{}
	for n := range notes {
		desired[n.Name] = true
	}
	entries, err := os.ReadDir(o.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if e.Type().IsRegular() && !desired[e.Name()] {
			errs = append(errs, o.Delete(context.Background(), nil, 0, &Note{Name: e.Name()}))
		}
	}
	return errors.Join(errs...)
}

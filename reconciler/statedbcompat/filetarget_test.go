package statedbcompat_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cilium/statedb"
	statedbindex "github.com/cilium/statedb/index"
	sdbreconciler "github.com/cilium/statedb/reconciler"
)

// file is a desired file: its name in the target directory and its
// content. It keeps statedb's Status, as a program written for statedb's
// reconciler does; the converge side reads and writes it through the
// converters.
type file struct {
	Name    string
	Content string
	Status  sdbreconciler.Status
}

func cloneFile(f *file) *file { c := *f; return &c }

func (f *file) TableHeader() []string { return []string{"Name", "Content", "Status"} }
func (f *file) TableRow() []string    { return []string{f.Name, f.Content, f.Status.String()} }

var fileName = statedb.Index[*file, string]{
	Name:       "name",
	FromObject: func(f *file) statedbindex.KeySet { return statedbindex.NewKeySet(statedbindex.String(f.Name)) },
	FromKey:    statedbindex.String,
	Unique:     true,
}

// fileWrite is one successful Update of the target: when (on the clock of
// the test's bubble), and whether it changed the file.
type fileWrite struct {
	name    string
	at      time.Time
	rewrote bool
}

// fileTarget keeps each object as a file named after it in dir. An Update
// writes the file only if its content differs, and fails while failLeft
// says so. It implements statedb's Operations and converge's alike.
type fileTarget struct {
	dir string

	mu       sync.Mutex
	failLeft map[string]int
	failures int
	writes   []fileWrite
}

func newFileTarget(dir string) *fileTarget {
	return &fileTarget{dir: dir, failLeft: map[string]int{}}
}

func (ft *fileTarget) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, f *file) error {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.failLeft[f.Name] > 0 {
		ft.failLeft[f.Name]--
		ft.failures++
		return fmt.Errorf("write %s: injected failure", f.Name)
	}
	path := filepath.Join(ft.dir, f.Name)
	if old, err := os.ReadFile(path); err == nil && string(old) == f.Content {
		ft.writes = append(ft.writes, fileWrite{name: f.Name, at: time.Now()})
		return nil
	}
	if err := os.WriteFile(path, []byte(f.Content), 0o600); err != nil {
		return err
	}
	ft.writes = append(ft.writes, fileWrite{name: f.Name, at: time.Now(), rewrote: true})
	return nil
}

func (ft *fileTarget) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, f *file) error {
	err := os.Remove(filepath.Join(ft.dir, f.Name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// Prune removes every file in dir that no desired object names.
func (ft *fileTarget) Prune(_ context.Context, _ statedb.ReadTxn, objs iter.Seq2[*file, statedb.Revision]) error {
	desired := map[string]bool{}
	for f := range objs {
		desired[f.Name] = true
	}
	entries, err := os.ReadDir(ft.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if !desired[e.Name()] {
			if err := os.Remove(filepath.Join(ft.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// fail makes name's next n Updates fail.
func (ft *fileTarget) fail(name string, n int) {
	ft.mu.Lock()
	ft.failLeft[name] = n
	ft.mu.Unlock()
}

// failed returns how many Updates failed by failLeft.
func (ft *fileTarget) failed() int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.failures
}

// mark returns the position in the log of writes from which
// firstRewriteSince looks: writes made from now on.
func (ft *fileTarget) mark() int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return len(ft.writes)
}

// firstRewriteSince returns when the first Update logged at or after
// position from rewrote name's file.
func (ft *fileTarget) firstRewriteSince(name string, from int) (time.Time, bool) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	for _, w := range ft.writes[from:] {
		if w.name == name && w.rewrote {
			return w.at, true
		}
	}
	return time.Time{}, false
}

// lastWrite returns when an Update last wrote (or found right) name's
// file.
func (ft *fileTarget) lastWrite(name string) time.Time {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	var last time.Time
	for _, w := range ft.writes {
		if w.name == name {
			last = w.at
		}
	}
	return last
}

// listDir returns each file in dir with its content.
func listDir(dir string) (map[string]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = string(data)
	}
	return out, nil
}

// Command tutorial is the program that docs/tutorial.md builds step by
// step: a reconciler that keeps a directory of notes (one file each) in
// sync with a table of desired notes. It runs a short scenario in a
// temporary directory and prints what happens at each step.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// app holds what the program needs after the hive has started: the
// database, the table, the initializer to complete, and the reconciler.
type app struct {
	db          *statedb.DB
	notes       statedb.RWTable[*Note]
	initialized func(statedb.WriteTxn)
	rec         reconciler.Reconciler[*Note]
}

// newHive returns the program's hive: statedb's database, job groups,
// converge's registry of reconcilers, a health provider, and the notes
// module, whose reconciler keeps dir in sync with the table.
func newHive(dir string, a *app) *hive.Hive {
	return hive.New(
		statedb.Cell, job.Cell, reconciler.Cell,
		cell.Provide(cell.NewSimpleHealth), // the job groups report health to it
		cell.Module("notes", "Notes",
			cell.ProvidePrivate(job.Registry.NewGroup), // the reconciler runs in it
			cell.Invoke(func(db *statedb.DB, p reconciler.Params) error {
				return a.register(db, p, dir)
			}),
		),
	)
}

// register creates the table, registers its initializer and starts the
// reconciler. It runs while the hive is being built, before it starts.
func (a *app) register(db *statedb.DB, p reconciler.Params, dir string) (err error) {
	a.db = db
	if a.notes, err = newNotesTable(db); err != nil {
		return err
	}
	// Nothing is pruned until the initial notes are in (load).
	wtxn := db.WriteTxn(a.notes)
	a.initialized = a.notes.RegisterInitializer(wtxn, "initial-notes")
	wtxn.Commit()

	a.rec, err = reconciler.New(reconciler.Config[*Note]{
		Table:           a.notes,
		GetObjectStatus: func(n *Note) reconciler.Status { return n.Status },
		SetObjectStatus: func(n *Note, s reconciler.Status) *Note { n.Status = s; return n },
		CloneObject:     (*Note).Clone,
		Operations:      &noteOps{dir: dir},
	}, p)
	return err
}

// load writes the initial set of notes and completes the table's
// initializer in the same transaction: from then on Prune may remove
// whatever the notes do not ask for.
func (a *app) load(notes ...*Note) statedb.Revision {
	wtxn := a.db.WriteTxn(a.notes)
	for _, n := range notes {
		n = n.Clone()
		n.Status = reconciler.StatusPending()
		a.notes.Insert(wtxn, n)
	}
	a.initialized(wtxn)
	rev := a.notes.Revision(wtxn)
	wtxn.Commit()
	return rev
}

// set writes notes, new or changed. Every write carries StatusPending():
// that is what asks the reconciler to act. It returns the table's
// revision after the write, for waiting.
func (a *app) set(notes ...*Note) statedb.Revision {
	wtxn := a.db.WriteTxn(a.notes)
	for _, n := range notes {
		n = n.Clone() // never change an object the table holds
		n.Status = reconciler.StatusPending()
		a.notes.Insert(wtxn, n)
	}
	rev := a.notes.Revision(wtxn)
	wtxn.Commit()
	return rev
}

// remove deletes notes from the table; the reconciler then calls Delete.
func (a *app) remove(names ...string) statedb.Revision {
	wtxn := a.db.WriteTxn(a.notes)
	for _, name := range names {
		a.notes.Delete(wtxn, &Note{Name: name})
	}
	rev := a.notes.Revision(wtxn)
	wtxn.Commit()
	return rev
}

// wait blocks until every change up to rev has succeeded or been given
// up on.
func (a *app) wait(rev statedb.Revision) {
	if err := a.rec.WaitUntilSettled(context.Background(), rev); err != nil {
		panic(err)
	}
}

// show prints each note with its status, then the directory.
func (a *app) show(dir string) {
	for n := range a.notes.All(a.db.ReadTxn()) {
		fmt.Printf("  note %-10s %s\n", n.Name, n.Status.Row())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			fmt.Printf("  file %s/\n", e.Name())
			continue
		}
		text, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			panic(err)
		}
		fmt.Printf("  file %-10s %q\n", e.Name(), text)
	}
}

func main() {
	dir, err := os.MkdirTemp("", "notes-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	var a app
	h := newHive(dir, &a)
	log := slog.New(slog.DiscardHandler)
	if err := h.Start(log, context.Background()); err != nil {
		panic(err)
	}
	defer h.Stop(log, context.Background())

	fmt.Println("1. the initial notes")
	a.wait(a.load(
		&Note{Name: "hello", Text: "hello, world\n"},
		&Note{Name: "todo", Text: "water the plants\n"},
	))
	a.show(dir)

	fmt.Println("2. a change and a delete")
	a.set(&Note{Name: "hello", Text: "hello again\n"})
	a.wait(a.remove("todo"))
	a.show(dir)

	fmt.Println("3. a note that can never be written: given up on")
	a.wait(a.set(&Note{Name: "../escape", Text: "no\n"}))
	a.show(dir)

	fmt.Println("4. a failure that a retry repairs")
	blocked := filepath.Join(dir, "blocked")
	if err := os.Mkdir(blocked, 0o755); err != nil {
		panic(err)
	}
	rev := a.set(&Note{Name: "blocked", Text: "was in the way\n"})
	if _, _, err := a.rec.WaitUntilReconciled(context.Background(), rev); err != nil {
		panic(err) // attempted once: failed, and a retry is scheduled
	}
	a.show(dir)
	if err := os.Remove(blocked); err != nil {
		panic(err)
	}
	a.wait(rev) // the next retry writes it
	a.show(dir)
}

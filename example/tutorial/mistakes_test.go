package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"

	"github.com/converge-go/converge/reconciler"
)

// The tests of this file each make one of the common mistakes that
// docs/tutorial.md lists, and check that the page quotes what the code
// then really says: change a message, and the page must change with it.

const tutorialPage = "../../docs/tutorial.md"

// quoted fails the test unless got contains want and docs/tutorial.md
// quotes want (line breaks and indentation in the page count as one
// space).
func quoted(t *testing.T, got, want string) {
	t.Helper()
	if !strings.Contains(got, want) {
		t.Fatalf("the mistake produced %q, which does not contain the quoted %q", got, want)
	}
	page, err := os.ReadFile(tutorialPage)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(oneLine(string(page)), oneLine(want)) {
		t.Fatalf("docs/tutorial.md does not quote %q", want)
	}
}

var space = regexp.MustCompile(`\s+`)

func oneLine(s string) string { return space.ReplaceAllString(s, " ") }

// build returns hive.New(cells...) and hive.New's panic, if any: a cell
// that cannot be applied panics there.
func build(cells ...cell.Cell) (h *hive.Hive, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%v", p)
		}
	}()
	return hive.New(cells...), nil
}

// start starts h and registers its stop with the test.
func start(t *testing.T, h *hive.Hive, log *slog.Logger) error {
	t.Helper()
	if err := h.Start(log, t.Context()); err != nil {
		return err
	}
	t.Cleanup(func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return nil
}

var quiet = slog.New(slog.DiscardHandler)

// notesModule is the program's module with its job group provided by
// provide, and the reconciler registered by register.
func notesModule(id string, provide func(ctors ...any) cell.Cell, register func(*statedb.DB, reconciler.Params) error) cell.Cell {
	return cell.Module(id, "Notes", provide(job.Registry.NewGroup), cell.Invoke(register))
}

// The mistake: a changed note written with the status it was read with.
func writeWithoutPending(a *app) statedb.Revision {
	wtxn := a.db.WriteTxn(a.notes)
	old, _, _ := a.notes.Get(wtxn, noteName.Query("hello"))
	changed := old.Clone()
	changed.Text = "hello again\n" // Status is still Done: nothing asks the reconciler
	a.notes.Insert(wtxn, changed)
	rev := a.notes.Revision(wtxn)
	wtxn.Commit()
	return rev
}

func TestMistakeNoPending(t *testing.T) {
	dir := t.TempDir()
	var a app
	if err := start(t, newHive(dir, &a), quiet); err != nil {
		t.Fatal(err)
	}
	a.wait(a.load(&Note{Name: "hello", Text: "hello, world\n"}))
	a.wait(writeWithoutPending(&a))
	// Ask for a full reconciliation too: it prunes, and refreshes only
	// what has been Done for RefreshInterval (30m), so it repairs nothing.
	a.rec.TriggerFullReconciliation()
	a.wait(a.notes.Revision(a.db.ReadTxn()))

	n, _, _ := a.notes.Get(a.db.ReadTxn(), noteName.Query("hello"))
	if n.Text != "hello again\n" || n.Status.Row() != "Done" {
		t.Fatalf("the table holds %q, %s; want the new text, still Done", n.Text, n.Status.Row())
	}
	got, err := os.ReadFile(filepath.Join(dir, "hello"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "hello, world\n" {
		t.Fatalf("the file holds %q: Update ran for a change written without Pending", got)
	}
	quoted(t, n.Text+" "+n.Status.Row(), "Done")
}

func TestMistakeProvideNotPrivate(t *testing.T) {
	register := func(*statedb.DB, reconciler.Params) error { return nil }
	_, err := build(statedb.Cell, job.Cell, reconciler.Cell, cell.Provide(cell.NewSimpleHealth),
		notesModule("notes", cell.Provide, register),
		notesModule("routes", cell.Provide, register), // a second module, as a real program has
	)
	if err == nil {
		t.Fatal("two modules providing their job group publicly built a hive")
	}
	quoted(t, err.Error(), "cannot provide job.Group from [0]: already provided by")

	// ProvidePrivate, as the tutorial has it, keeps each module's own.
	if _, err := build(statedb.Cell, job.Cell, reconciler.Cell, cell.Provide(cell.NewSimpleHealth),
		notesModule("notes", cell.ProvidePrivate, register),
		notesModule("routes", cell.ProvidePrivate, register),
	); err != nil {
		t.Fatalf("two modules with private job groups: %v", err)
	}
}

func TestMistakeNoHealth(t *testing.T) {
	var a app
	h, err := build(statedb.Cell, job.Cell, reconciler.Cell, // no cell.Provide(cell.NewSimpleHealth)
		notesModule("notes", cell.ProvidePrivate, func(db *statedb.DB, p reconciler.Params) error {
			return a.register(db, p, t.TempDir())
		}))
	if err == nil {
		err = start(t, h, quiet)
	}
	if err == nil {
		t.Fatal("a hive without a cell.Health started")
	}
	quoted(t, err.Error(), "missing type: cell.Health")
}

func TestMistakeNoJobGroup(t *testing.T) {
	var a app
	h, err := build(statedb.Cell, job.Cell, reconciler.Cell, cell.Provide(cell.NewSimpleHealth),
		cell.Module("notes", "Notes", // no cell.ProvidePrivate(job.Registry.NewGroup)
			cell.Invoke(func(db *statedb.DB, p reconciler.Params) error { return a.register(db, p, t.TempDir()) })))
	if err == nil {
		err = start(t, h, quiet)
	}
	if err == nil {
		t.Fatal("a module without a job group started a reconciler")
	}
	quoted(t, err.Error(), "missing type: job.Group")
}

func TestMistakeConfigField(t *testing.T) {
	h, err := build(statedb.Cell, job.Cell, reconciler.Cell, cell.Provide(cell.NewSimpleHealth),
		notesModule("notes", cell.ProvidePrivate, func(db *statedb.DB, p reconciler.Params) error {
			notes, err := newNotesTable(db)
			if err != nil {
				return err
			}
			_, err = reconciler.New(reconciler.Config[*Note]{
				Table:           notes,
				GetObjectStatus: func(n *Note) reconciler.Status { return n.Status },
				SetObjectStatus: func(n *Note, s reconciler.Status) *Note { n.Status = s; return n },
				Operations:      &noteOps{dir: t.TempDir()}, // CloneObject forgotten
			}, p)
			return err
		}))
	if err == nil {
		err = start(t, h, quiet)
	}
	if err == nil {
		t.Fatal("a Config without CloneObject was accepted")
	}
	quoted(t, err.Error(), "invalid reconciler config: Config.CloneObject is required")
}

// The mistake: a "clone" that is the object itself.
func sameNote(n *Note) *Note { return n }

func TestMistakeCloneSamePointer(t *testing.T) {
	var a app
	h, err := build(statedb.Cell, job.Cell, reconciler.Cell, cell.Provide(cell.NewSimpleHealth),
		notesModule("notes", cell.ProvidePrivate, func(db *statedb.DB, p reconciler.Params) (err error) {
			a.db = db
			if a.notes, err = newNotesTable(db); err != nil {
				return err
			}
			a.rec, err = reconciler.New(reconciler.Config[*Note]{
				Table:           a.notes,
				GetObjectStatus: func(n *Note) reconciler.Status { return n.Status },
				SetObjectStatus: func(n *Note, s reconciler.Status) *Note { n.Status = s; return n },
				CloneObject:     sameNote,
				Operations:      &noteOps{dir: t.TempDir()},
			}, p)
			return err
		}))
	if err != nil {
		t.Fatal(err)
	}
	if err := start(t, h, quiet); err != nil {
		t.Fatal(err)
	}
	rev := a.set(&Note{Name: "hello", Text: "hello, world\n"})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// The waits return the misconfiguration instead of waiting forever.
	err = a.rec.WaitUntilSettled(ctx, rev)
	if err == nil || ctx.Err() != nil {
		t.Fatalf("WaitUntilSettled with a CloneObject that returns its argument: %v", err)
	}
	quoted(t, err.Error(), "invalid reconciler config: 1 object(s) cannot be reconciled, e.g. hello: "+
		"invalid reconciler config: Config.CloneObject returned the object itself; it must return a copy")
}

// logCatcher is a slog handler that hands every record's message to a
// channel, so that a test can wait for a warning instead of sleeping.
type logCatcher struct{ msgs chan string }

func (c logCatcher) Enabled(context.Context, slog.Level) bool { return true }
func (c logCatcher) Handle(_ context.Context, r slog.Record) error {
	select {
	case c.msgs <- r.Message:
	default: // nobody is waiting for this one
	}
	return nil
}
func (c logCatcher) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c logCatcher) WithGroup(string) slog.Handler      { return c }

func TestMistakeNoInitializer(t *testing.T) {
	var a app
	h, err := build(statedb.Cell, job.Cell, reconciler.Cell, cell.Provide(cell.NewSimpleHealth),
		notesModule("notes", cell.ProvidePrivate, func(db *statedb.DB, p reconciler.Params) (err error) {
			a.db = db
			if a.notes, err = newNotesTable(db); err != nil {
				return err
			}
			// No RegisterInitializer: the table counts as initialized at once.
			a.rec, err = reconciler.New(reconciler.Config[*Note]{
				Table:           a.notes,
				GetObjectStatus: func(n *Note) reconciler.Status { return n.Status },
				SetObjectStatus: func(n *Note, s reconciler.Status) *Note { n.Status = s; return n },
				CloneObject:     (*Note).Clone,
				Operations:      &noteOps{dir: t.TempDir()},
			}, p)
			return err
		}))
	if err != nil {
		t.Fatal(err)
	}
	logs := logCatcher{msgs: make(chan string, 64)}
	if err := start(t, h, slog.New(logs)); err != nil {
		t.Fatal(err)
	}
	const want = "Nothing is pruned until the first write to the table, or InitialPruneDelay: it has no pending initializer. " +
		"Register one with RegisterInitializer and mark it done once the desired set is complete."
	timeout := time.After(10 * time.Second)
	var seen bytes.Buffer
	for {
		select {
		case msg := <-logs.msgs:
			if strings.Contains(msg, "RegisterInitializer") {
				quoted(t, msg, want)
				return
			}
			seen.WriteString(msg + "\n")
		case <-timeout:
			t.Fatalf("no warning about the missing initializer in 10s; the log said:\n%s", seen.String())
		}
	}
}

// TestMistakeNoStatusIndex: a table made without the status index that
// WaitForReconciliation is given fails the wait at once, saying what to
// add, instead of panicking inside statedb.
func TestMistakeNoStatusIndex(t *testing.T) {
	db := statedb.New()
	notes, err := statedb.NewTable(db, "notes", noteName) // noteStatus forgotten
	if err != nil {
		t.Fatal(err)
	}
	err = reconciler.WaitForReconciliation(t.Context(), db, notes, noteStatus)
	if err == nil {
		t.Fatal("WaitForReconciliation on a table without its status index returned nil")
	}
	quoted(t, err.Error(), `table "notes" has no index "status": make the table with it`)
}

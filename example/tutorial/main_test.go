package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/statedb"
	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: every hive here
// is stopped, and a stopped hive must leave nothing running.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The program runs its scenario and prints what docs/tutorial.md shows.
func Example() {
	main()
	// Output:
	// 1. the initial notes
	//   note hello      Done
	//   note todo       Done
	//   file hello      "hello, world\n"
	//   file todo       "water the plants\n"
	// 2. a change and a delete
	//   note hello      Done
	//   file hello      "hello again\n"
	// 3. a note that can never be written: given up on
	//   note ../escape  Error: "../escape" is not a plain file name
	//   note hello      Done
	//   file hello      "hello again\n"
	// 4. a failure that a retry repairs
	//   note ../escape  Error: "../escape" is not a plain file name
	//   note blocked    Error: blocked is a directory: remove it so that the note can be written
	//   note hello      Done
	//   file blocked/
	//   file hello      "hello again\n"
	//   note ../escape  Error: "../escape" is not a plain file name
	//   note blocked    Done
	//   note hello      Done
	//   file blocked    "was in the way\n"
	//   file hello      "hello again\n"
}

// Prune removes the regular files no note asks for, and nothing else.
func TestPruneRemovesWhatNoNoteAsksFor(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"hello", "stray"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "subdir"), 0o755); err != nil {
		t.Fatal(err)
	}
	desired := func(yield func(*Note, statedb.Revision) bool) { yield(&Note{Name: "hello"}, 1) }
	if err := (&noteOps{dir: dir}).Prune(context.Background(), nil, desired); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"hello", "subdir"}; !slices.Equal(names, want) {
		t.Fatalf("after Prune the directory holds %v, want %v", names, want)
	}
}

// Delete of a file that is already gone succeeds: operations run again
// after failures and restarts.
func TestDeleteOfMissingFileSucceeds(t *testing.T) {
	err := (&noteOps{dir: t.TempDir()}).Delete(context.Background(), nil, 0, &Note{Name: "gone"})
	if err != nil {
		t.Fatalf("Delete of a missing file: %v, want nil", err)
	}
}

// TestTutorialQuotesTheProgram fails unless every Go block of
// docs/tutorial.md is a verbatim excerpt of a Go file of this directory:
// what the page shows is what compiles, runs and is tested here.
func TestTutorialQuotesTheProgram(t *testing.T) {
	page, err := os.ReadFile(tutorialPage)
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var sources [][]byte
	for _, f := range files {
		src, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, src)
	}
	blocks := goBlocks(page)
	if len(blocks) < 5 {
		t.Fatalf("docs/tutorial.md has %d Go blocks; the tutorial quotes at least 5 steps of the program", len(blocks))
	}
	for _, b := range blocks {
		if !slices.ContainsFunc(sources, func(src []byte) bool { return bytes.Contains(src, b.text) }) {
			t.Errorf("docs/tutorial.md line %d: the Go block is in no file of example/tutorial; quote the program as it is:\n%s",
				b.line, b.text)
		}
	}
}

// block is a fenced code block of a page and the line its text starts on.
type block struct {
	line int
	text []byte
}

// goBlocks returns the ```go blocks of a Markdown page, each with its
// final newline.
func goBlocks(page []byte) []block {
	var out []block
	var cur *block
	for i, line := range bytes.SplitAfter(page, []byte("\n")) {
		trimmed := bytes.TrimSpace(line)
		switch {
		case cur == nil && bytes.Equal(trimmed, []byte("```go")):
			cur = &block{line: i + 2}
		case cur != nil && bytes.Equal(trimmed, []byte("```")):
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.text = append(cur.text, line...)
		}
	}
	return out
}

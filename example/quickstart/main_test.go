package main

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: main stops its
// hive, and the hive must stop everything it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The program runs and prints what the README says.
func Example() {
	main()
	// Output:
	// route add 10.0.0.0/8 via 192.168.1.1
	// 10.0.0.0/8 Done
}

// TestReadmeQuickStartIsThisProgram fails unless the README's quick start
// is this program, byte for byte (but for a trailing newline): what a
// newcomer pastes is what this package compiles and Example runs.
func TestReadmeQuickStartIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	block, err := quickStartBlock(readme)
	if err != nil {
		t.Fatal(err)
	}
	program, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	block, program = bytes.TrimSuffix(block, []byte("\n")), bytes.TrimSuffix(program, []byte("\n"))
	if !bytes.Equal(block, program) {
		line := 1 + bytes.Count(commonPrefix(block, program), []byte("\n"))
		t.Fatalf("README.md's quick start differs from example/quickstart/main.go from line %d of the program: "+
			"change both together", line)
	}
}

// quickStartBlock returns the first ```go block after the "## Quick start"
// heading of a README.
func quickStartBlock(readme []byte) ([]byte, error) {
	_, rest, ok := bytes.Cut(readme, []byte("\n## Quick start\n"))
	if !ok {
		return nil, errors.New(`README.md has no "## Quick start" heading`)
	}
	rest, _, _ = bytes.Cut(rest, []byte("\n## ")) // this section only
	_, rest, ok = bytes.Cut(rest, []byte("\n```go\n"))
	if !ok {
		return nil, errors.New("README.md's quick start has no ```go block")
	}
	block, _, ok := bytes.Cut(rest, []byte("\n```\n"))
	if !ok {
		return nil, errors.New("README.md's quick start block does not end")
	}
	return append(block, '\n'), nil
}

func commonPrefix(a, b []byte) []byte {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

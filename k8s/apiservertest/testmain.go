package apiservertest

import (
	"fmt"
	"os"
	"testing"
)

// RunTests is a test package's TestMain body for tests that share one API
// server: it starts the server into *srv, runs the tests, closes the
// server and, when they passed, checks that no goroutine was left behind
// (FindLeaks). It returns the exit code: TestMain(m) { os.Exit(RunTests(m, &srv)) }.
func RunTests(m *testing.M, srv **Server) int {
	s, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*srv = s
	code := m.Run()
	s.Close()
	if code != 0 {
		return code
	}
	if err := FindLeaks(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

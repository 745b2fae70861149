package apiservertest

import (
	"os"
	"testing"
)

// shared serves the tests that neither stop nor restart it.
var shared *Server

func TestMain(m *testing.M) { os.Exit(RunTests(m, &shared)) }

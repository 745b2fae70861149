package main

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: every test stops
// its hive, and the hive must stop everything it started.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

package index_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if a goroutine, such as the statedb
// graveyard worker a test started, outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

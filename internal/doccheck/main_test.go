package doccheck

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: the tests that
// run the example agent read its output on goroutines of their own, which
// must end once the agent has stopped.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

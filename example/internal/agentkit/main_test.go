package agentkit

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the tests if a goroutine outlives them: the shell and
// the server stop everything they start.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

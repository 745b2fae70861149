package main

import (
	"encoding/json"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// agentArgsEnv, when set (to a JSON list of arguments), makes the test
// binary run the example's main with them instead of the tests: the
// restart tests start the agent as a process of its own, to kill it.
const agentArgsEnv = "CONVERGE_EXAMPLE_AGENT_ARGS"

// TestMain fails the tests if a goroutine outlives them: every test stops
// its hive, and the hive must stop everything it started.
func TestMain(m *testing.M) {
	if args := os.Getenv(agentArgsEnv); args != "" {
		var a []string
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			panic(err)
		}
		os.Args = append(os.Args[:1], a...)
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

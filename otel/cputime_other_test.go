//go:build !unix

package convergeotel_test

import "time"

// cpuTime is zero where the process's CPU time is not known.
func cpuTime() time.Duration { return 0 }

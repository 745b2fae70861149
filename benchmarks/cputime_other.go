//go:build !unix

package main

import "time"

// cpuTime is not measured on this platform: retry-storm's CPU row reads 0.
func cpuTime() time.Duration { return 0 }

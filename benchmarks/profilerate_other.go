//go:build !unix

package main

import (
	"io"
	"runtime/pprof"
)

// startCPUProfile starts a CPU profile into w at pprof's 100 Hz: the rate
// is only raised where stderr can be silenced for the runtime's complaint.
func startCPUProfile(w io.Writer, _ int) error {
	return pprof.StartCPUProfile(w)
}

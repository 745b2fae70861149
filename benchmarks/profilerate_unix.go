//go:build unix

package main

import (
	"io"
	"os"
	"runtime"
	"runtime/pprof"

	"golang.org/x/sys/unix"
)

// startCPUProfile starts a CPU profile into w sampling at hz. pprof starts
// every profile at 100 Hz; a rate set just before wins, and the runtime
// complains on stderr that it cannot set 100 Hz. That complaint is
// expected, so stderr is pointed at /dev/null for the instant it is
// printed. If anything fails on the way, the profile runs at 100 Hz.
func startCPUProfile(w io.Writer, hz int) error {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return pprof.StartCPUProfile(w)
	}
	defer null.Close()
	saved, err := unix.Dup(2)
	if err != nil {
		return pprof.StartCPUProfile(w)
	}
	defer unix.Close(saved)
	if err := unix.Dup2(int(null.Fd()), 2); err != nil {
		return pprof.StartCPUProfile(w)
	}
	defer unix.Dup2(saved, 2) //nolint:errcheck // nothing to do but carry on
	runtime.SetCPUProfileRate(hz)
	return pprof.StartCPUProfile(w)
}

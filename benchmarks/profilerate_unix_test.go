//go:build unix

package main

import (
	"bytes"
	"runtime/pprof"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestProfileRate: startCPUProfile samples at the rate asked for, not at
// pprof's 100 Hz, and gives stderr back as it found it.
func TestProfileRate(t *testing.T) {
	var before, after unix.Stat_t
	if err := unix.Fstat(2, &before); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := startCPUProfile(&buf, profileHz); err != nil {
		t.Skipf("no CPU profile could be started (another one runs?): %v", err)
	}
	if err := unix.Fstat(2, &after); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(50 * time.Millisecond)
	for time.Now().Before(deadline) {
	}
	pprof.StopCPUProfile()
	p, err := readProfile(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(time.Second / profileHz); p.period != want {
		t.Errorf("sampling period %s, want %s", time.Duration(p.period), time.Duration(want))
	}
	if before.Dev != after.Dev || before.Ino != after.Ino {
		t.Errorf("stderr is another file after startCPUProfile")
	}
}

package main

import (
	"context"
	"runtime/pprof"
	"sync/atomic"
	"testing"
	"time"
)

// spinCPU runs labelCPU over a goroutine that spins for a while, started
// from a goroutine labelled for labelCPU when labelled is set (a child
// inherits its parent's labels), and returns what labelCPU measured and
// the process's CPU time over the same window.
func spinCPU(t *testing.T, labelled bool) (cpu, process time.Duration) {
	t.Helper()
	var stop atomic.Bool
	done := make(chan struct{})
	spin := func() {
		defer close(done)
		for !stop.Load() {
		}
	}
	cpu0 := cpuTime()
	cpu, ok, err := labelCPU(func() error {
		if labelled {
			pprof.Do(context.Background(), pprof.Labels(cpuLabel, cpuLabelValue), func(context.Context) { go spin() })
		} else {
			go spin()
		}
		// The profiler samples every few ms of CPU: give it a window.
		time.Sleep(200 * time.Millisecond)
		stop.Store(true)
		<-done
		return nil
	})
	if !ok {
		t.Skipf("no CPU profile could be started (another one runs?): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return cpu, cpuTime() - cpu0
}

// TestLabelCPU: labelCPU counts the CPU of the labelled goroutines and of
// those they start, and nothing of the others. The spinner is nearly all
// the process does: it must come out at most of the process's CPU, not at
// the fraction a kernel that delivers fewer samples than asked for would
// leave (a quarter, with 250 Hz ticks and 1000 Hz asked).
func TestLabelCPU(t *testing.T) {
	cpu, process := spinCPU(t, true)
	if cpu <= 0 {
		t.Errorf("labelled spinner: %s of CPU, want some", cpu)
	}
	if process > 0 && cpu < process/2 {
		t.Errorf("labelled spinner: %s of CPU, want most of the process's %s", cpu, process)
	}
	if cpu, _ := spinCPU(t, false); cpu != 0 {
		t.Errorf("unlabelled spinner: %s of CPU counted, want none", cpu)
	}
}

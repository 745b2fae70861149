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
// inherits its parent's labels), and returns what labelCPU measured.
func spinCPU(t *testing.T, labelled bool) time.Duration {
	t.Helper()
	var stop atomic.Bool
	done := make(chan struct{})
	spin := func() {
		defer close(done)
		for !stop.Load() {
		}
	}
	cpu, ok, err := labelCPU(func() error {
		if labelled {
			pprof.Do(context.Background(), pprof.Labels(cpuLabel, cpuLabelValue), func(context.Context) { go spin() })
		} else {
			go spin()
		}
		// The profiler samples every 10ms of CPU: give it a window.
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
	return cpu
}

// TestLabelCPU: labelCPU counts the CPU of the labelled goroutines and of
// those they start, and nothing of the others.
func TestLabelCPU(t *testing.T) {
	if cpu := spinCPU(t, true); cpu <= 0 {
		t.Errorf("labelled spinner: %s of CPU, want some", cpu)
	}
	if cpu := spinCPU(t, false); cpu != 0 {
		t.Errorf("unlabelled spinner: %s of CPU counted, want none", cpu)
	}
}

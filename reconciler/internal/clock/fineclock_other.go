//go:build !linux

package clock

import "time"

// fineClock is Linux-only (fineclock_linux.go); elsewhere timers use
// time.Timer alone.
type fineClock struct{ c chan time.Time }

func newFineClock() *fineClock { return nil }

func (fc *fineClock) set(time.Duration) {}
func (fc *fineClock) stop()             {}
func (fc *fineClock) close()            {}

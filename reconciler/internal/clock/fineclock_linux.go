//go:build linux

package clock

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// fineClock wakes the loop at a deadline with the kernel's timer
// precision. When Go's runtime has nothing to run it sleeps in epoll_wait,
// whose timeout is in whole milliseconds, rounded up: a time.Timer due in
// less than a millisecond fires up to a millisecond late. A timerfd in the
// same netpoller ends that sleep when it is due. The round limiter's waits
// are that short, and a change that comes while rounds are paced waits
// them out. (How late each is: benchmarks/README.md, the round timer.)
type fineClock struct {
	fd   int
	file *os.File
	c    chan time.Time
	done chan struct{}
}

// newFineClock opens a timerfd and starts the goroutine that reads it. It
// returns nil when the kernel refuses one: the caller falls back to
// time.Timer.
func newFineClock() *fineClock {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	// Non-blocking, so os.File registers it with the netpoller: a Read
	// parks the goroutine, not a thread.
	fc := &fineClock{fd: fd, file: os.NewFile(uintptr(fd), "converge-timerfd"),
		c: make(chan time.Time, 1), done: make(chan struct{})}
	go fc.run()
	return fc
}

// run turns each expiry into a tick on c, dropped if one waits already.
func (fc *fineClock) run() {
	defer close(fc.done)
	var buf [8]byte // the expiry count
	for {
		if _, err := fc.file.Read(buf[:]); err != nil {
			return // closed
		}
		select {
		case fc.c <- time.Now():
		default:
		}
	}
}

// set makes the clock tick once after d, replacing any earlier setting,
// and drops a tick not read yet. A tick of the earlier setting can still
// slip through while its read is under way: the loop takes a wake-up as a
// reason to look, never as proof that a deadline passed.
func (fc *fineClock) set(d time.Duration) {
	select {
	case <-fc.c:
	default:
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(int64(d), 1))} // zero would disarm it
	_ = unix.TimerfdSettime(fc.fd, 0, &spec, nil)
}

// stop disarms the clock.
func (fc *fineClock) stop() {
	var spec unix.ItimerSpec
	_ = unix.TimerfdSettime(fc.fd, 0, &spec, nil)
}

// close releases the timerfd and waits for the goroutine to end.
func (fc *fineClock) close() {
	fc.file.Close()
	<-fc.done
}

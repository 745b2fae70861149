package dirsource

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/converge-go/converge/source"
)

// A real inotify queue overflow ends the watch with source.ErrOverflow,
// so the source lists again. The watch is stalled while more events than
// the kernel queues (fs.inotify.max_queued_events) are generated.
func TestOverflowEndsWatch(t *testing.T) {
	limit, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Fatal(err)
	}
	maxQueued, err := strconv.Atoi(strings.TrimSpace(string(limit)))
	if err != nil || maxQueued > 1<<17 {
		t.Fatalf("max_queued_events %q: too large to overflow in a test", limit)
	}
	dir := t.TempDir()
	lw, err := NewListerWatcher(dir, nil, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	stall := make(chan struct{})
	lw.beforeEvent = func() { <-stall }
	res, err := lw.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- lw.Watch(ctx, res.Resume, func(source.Event[File]) error { return nil })
	}()
	// Each file is an IN_CREATE and an IN_MODIFY. fsnotify's reader takes
	// one read of events off the kernel's queue before the stalled
	// consumer blocks it: up to 64 KiB, 2048 events of 32 bytes for these
	// names. Under load that first read comes late and takes many; with a
	// margin of only 200 events the queue then never overflowed, and the
	// watch waited out the context (4 of 10 runs under two CPU burners).
	const firstRead = 64 << 10 / 32
	for i := range (maxQueued+firstRead)/2 + 100 {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%05d.yaml", i)), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	close(stall)
	if err := <-done; !errors.Is(err, source.ErrOverflow) {
		t.Fatalf("watch ended with %v, want ErrOverflow", err)
	}
	// The resume point is spent: the source must list again.
	if err := lw.Watch(ctx, res.Resume, nil); !errors.Is(err, source.ErrExpired) {
		t.Fatalf("second watch: %v, want ErrExpired", err)
	}
}

func TestLimitErrors(t *testing.T) {
	for errno, want := range map[syscall.Errno]string{
		syscall.EMFILE: "fs.inotify.max_user_instances",
		syscall.ENOSPC: "fs.inotify.max_user_watches",
	} {
		err := limitError("watch /x", fmt.Errorf("wrapped: %w", errno))
		if !errors.Is(err, ErrInotifyLimit) || !errors.Is(err, errno) || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: got %v, want ErrInotifyLimit naming %s", errno, err, want)
		}
	}
	if err := limitError("x", syscall.EACCES); errors.Is(err, ErrInotifyLimit) {
		t.Errorf("EACCES reported as a limit: %v", err)
	}
}

func TestUnsupportedFilesystems(t *testing.T) {
	fake := func(magic int64) func(string, *syscall.Statfs_t) error {
		return func(_ string, st *syscall.Statfs_t) error { st.Type = magic; return nil }
	}
	for magic, name := range unreliableFS {
		err := checkFS("/d", fake(magic))
		if !errors.Is(err, ErrUnsupportedFS) || !strings.Contains(err.Error(), name) {
			t.Errorf("%s: got %v", name, err)
		}
	}
	if err := checkFS("/d", fake(0xEF53)); err != nil { // ext4
		t.Errorf("ext4: %v", err)
	}
	// The real temporary directory is on a local filesystem.
	if err := checkFS(t.TempDir(), statfs); err != nil {
		t.Errorf("temp dir: %v", err)
	}
}

// A link swapped to a file outside the directory between the checks and
// the open, and left so or swapped back right after the open, is never
// read: the opened file must be the one the name leads to inside the
// directory after the open.
func TestSymlinkSwappedAtOpenIsNotRead(t *testing.T) {
	dir, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.yaml")
	if err := os.WriteFile(secret, []byte("key: secret\nvalue: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "..real.yaml"), []byte("key: k\nvalue: ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "a.yaml")
	point := func(target string) {
		tmp := link + ".new"
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, link); err != nil {
			t.Fatal(err)
		}
	}
	point("..real.yaml")
	lw, err := NewListerWatcher(dir, nil, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if f, _, _ := lw.read("a.yaml"); f.Err != nil || !strings.Contains(string(f.Data), "ok") {
		t.Fatalf("untouched: %q %v", f.Data, f.Err)
	}
	for _, back := range []bool{false, true} {
		opens := 0
		lw.opening = func(path string, opened bool) {
			switch {
			case !opened:
				opens++
				point(secret)
			case back:
				point("..real.yaml")
			}
		}
		f, _, gone := lw.read("a.yaml")
		if gone || f.Data != nil || f.Err == nil || opens == 0 {
			t.Fatalf("back %v: read %q, %v, gone %v, %d opens", back, f.Data, f.Err, gone, opens)
		}
		if want := map[bool]error{false: ErrOutsideDir, true: ErrUnreadable}[back]; !errors.Is(f.Err, want) {
			t.Fatalf("back %v: %v, want %v", back, f.Err, want)
		}
		point("..real.yaml")
	}
}

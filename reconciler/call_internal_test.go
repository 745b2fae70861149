package reconciler

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestCallPanicLogsKeyOnlyWhenThereIsOne: a panicking Prune (no key) is
// logged without an empty key=""; an object's panic names its key.
func TestCallPanicLogsKeyOnlyWhenThereIsOne(t *testing.T) {
	var buf bytes.Buffer
	r := &runner[int]{reconciler: &reconciler[int]{log: slog.New(slog.NewTextHandler(&buf, nil))}}
	panicking := func(context.Context) error { panic("boom") }

	err := r.call(context.Background(), func() {}, OpPrune, "", 0, panicking)
	if !errors.Is(err, ErrPanic) {
		t.Fatalf("prune panic: %v, want ErrPanic", err)
	}
	if strings.Contains(buf.String(), "key=") {
		t.Errorf("a prune's panic is logged with a key:\n%s", buf.String())
	}
	buf.Reset()
	r.call(context.Background(), func() {}, OpUpdate, "obj-1", 0, panicking)
	if !strings.Contains(buf.String(), "key=obj-1") {
		t.Errorf("an object's panic is logged without its key:\n%s", buf.String())
	}
}

// TestCallLateResultIsTimeout: an operation that returns after its
// deadline passed and overrun was called fails with ErrTimeout, nil and
// errors alike: the loop already counted it as failed, and a whole-set
// loop that takes the result before the overrun signal must read the same.
func TestCallLateResultIsTimeout(t *testing.T) {
	r := &runner[int]{reconciler: &reconciler[int]{log: slog.New(slog.DiscardHandler)}}
	r.cfg.OperationTimeout = time.Millisecond
	for _, ret := range []error{nil, errors.New("late failure"), context.Canceled} {
		overran := make(chan struct{})
		err := r.call(context.Background(), func() { close(overran) }, OpSync, "", 0, func(ctx context.Context) error {
			<-overran // returns once the loop was told it is overdue
			return ret
		})
		if !errors.Is(err, ErrTimeout) {
			t.Errorf("returning %v after the deadline: call returned %v, want ErrTimeout", ret, err)
		}
	}
	overruns := 0
	if err := r.call(context.Background(), func() { overruns++ }, OpSync, "", 0, func(context.Context) error { return nil }); err != nil || overruns != 0 {
		t.Errorf("in time: call returned %v with %d overruns, want nil and none", err, overruns)
	}
}

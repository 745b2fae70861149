package reconciler

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestCallPanicLogsKeyOnlyWhenThereIsOne: a panicking Prune (no key) is
// logged without an empty key=""; an object's panic names its key.
func TestCallPanicLogsKeyOnlyWhenThereIsOne(t *testing.T) {
	var buf bytes.Buffer
	r := &reconciler[int]{log: slog.New(slog.NewTextHandler(&buf, nil))}
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

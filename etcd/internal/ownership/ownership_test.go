package ownership

import (
	"context"
	"errors"
	"testing"

	"go.uber.org/goleak"

	"github.com/converge-go/converge/etcd/fencing"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var errLost = errors.New("lost")

func TestEndCancelsInFlightBeforeReturning(t *testing.T) {
	tok := fencing.Token{Key: "/k", Revision: 7}
	c := NewClaim(tok)
	opCtx, release, ok := c.Start(context.Background())
	if !ok {
		t.Fatal("Start on a live claim failed")
	}
	if got, _ := fencing.FromContext(opCtx); got != tok {
		t.Fatalf("op context token %v, want %v", got, tok)
	}
	c.End(errLost)
	// No wait: End must have cancelled before returning.
	if err := context.Cause(opCtx); !errors.Is(err, errLost) {
		t.Fatalf("cause right after End: %v, want errLost", err)
	}
	if _, _, ok := c.Start(context.Background()); ok {
		t.Fatal("Start after End succeeded")
	}
	release()
	release() // idempotent
	if n := c.InFlight(); n != 0 {
		t.Fatalf("in flight after release: %d", n)
	}
}

func TestDrainWaitsForReleaseAndRefusesNewOps(t *testing.T) {
	c := NewClaim(fencing.Token{Key: "/k", Revision: 1})
	opCtx, release, _ := c.Start(context.Background())
	drained := c.Drain()
	if _, _, ok := c.Start(context.Background()); ok {
		t.Fatal("Start while draining succeeded")
	}
	select {
	case <-drained:
		t.Fatal("drained with an operation in flight")
	default:
	}
	if opCtx.Err() != nil {
		t.Fatal("Drain cancelled the operation in flight")
	}
	release()
	select {
	case <-drained:
	default:
		t.Fatal("not drained after the last release")
	}
	if c.Drain() != drained {
		t.Fatal("a second Drain returned another channel")
	}
}

func TestNotifierClosesOnce(t *testing.T) {
	var n Notifier
	ch := n.Changed()
	if n.Changed() != ch {
		t.Fatal("Changed before Notify returned another channel")
	}
	n.Notify()
	select {
	case <-ch:
	default:
		t.Fatal("Notify did not close the channel")
	}
	if n.Changed() == ch {
		t.Fatal("Changed after Notify returned the closed channel")
	}
	n.Notify()
}

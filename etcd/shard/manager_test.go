package shard

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

// Members split the slots by rendezvous hashing; a joining member takes
// only its share, each from one of the others; a member that stops cleanly
// hands its slots over without anyone waiting for its lease (10 s).
func TestJoinAndLeaveMoveOnlyTheirShare(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	long := func(cfg *Config) { cfg.TTL = 10 * time.Second }
	a := startMember(t, cli, "a", long)
	b := startMember(t, cli, "b", long)
	two := []*member{a, b}
	waitUntil(t, two, balanced(two))
	before := ownersOf(two)

	d := startMember(t, cli, "d", long)
	three := []*member{a, b, d}
	waitUntil(t, three, balanced(three))
	after := ownersOf(three)
	moved := 0
	for s, o := range after {
		if before[s] != o {
			moved++
			if o != "d" {
				t.Fatalf("slot %d moved %s -> %s on d's join", s, before[s], o)
			}
		}
	}
	if moved == 0 || moved == testSlots {
		t.Fatalf("%d of %d slots moved on one join", moved, testSlots)
	}

	stopped := time.Now()
	b.stop()
	rest := []*member{a, d}
	waitUntil(t, rest, balanced(rest))
	if waited := time.Since(stopped); waited >= 10*time.Second {
		t.Fatalf("slots moved only after %v: the clean stop did not release them", waited)
	}
	for s, o := range ownersOf(rest) {
		if after[s] != o && after[s] != "b" {
			t.Fatalf("slot %d moved %s -> %s when b left", s, after[s], o)
		}
	}
}

// A slot being handed over is released only after its operation in flight
// is released: until then the new owner does not own it, and the running
// operation keeps its context.
func TestHandoverWaitsForInFlightRelease(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	a := startMember(t, cli, "a", nil)
	waitUntil(t, []*member{a}, balanced([]*member{a}))
	// A slot that b will take from a.
	slot := -1
	for s := range testSlots {
		if Assign(s, []string{"a", "b"}) == "b" {
			slot = s
			break
		}
	}
	key := keyIn(slot)
	opCtx, release, ok := a.Acquire(context.Background(), key)
	if !ok {
		t.Fatalf("a cannot Acquire a key of its slot %d", slot)
	}
	tok, _ := a.Token(slot)

	b := startMember(t, cli, "b", nil)
	both := []*member{a, b}
	waitUntil(t, both, func() string {
		if a.Owns(key) {
			return "a still owns the slot being handed over"
		}
		return ""
	})
	// Every other slot b was assigned has moved: b has seen the group and
	// acted, and only the draining slot waits.
	waitUntil(t, both, func() string {
		for s := range testSlots {
			if s != slot && Assign(s, []string{"a", "b"}) == "b" && !slices.Contains(b.Owned(), s) {
				return "b does not own its other slots yet"
			}
		}
		return ""
	})
	if b.Owns(key) {
		t.Fatal("b owns the slot while a's operation is in flight")
	}
	if _, _, ok := a.Acquire(context.Background(), key); ok {
		t.Fatal("a started an operation on a slot it is handing over")
	}
	if opCtx.Err() != nil {
		t.Fatalf("the in-flight operation was cancelled during a graceful drain: %v", context.Cause(opCtx))
	}
	resp, err := cli.Get(context.Background(), tok.Key)
	if err != nil || len(resp.Kvs) != 1 || resp.Kvs[0].CreateRevision != tok.Revision {
		t.Fatalf("a's claim key during the drain: %v %v", resp, err)
	}

	release()
	waitUntil(t, both, func() string {
		if !b.Owns(key) {
			return "b does not own the slot after a released it"
		}
		return ""
	})
	if !errors.Is(context.Cause(opCtx), context.Canceled) {
		t.Fatalf("released op context: %v", context.Cause(opCtx))
	}
	newTok, _ := b.Token(slot)
	if newTok.Revision <= tok.Revision {
		t.Fatalf("new claim's revision %d is not above the old %d", newTok.Revision, tok.Revision)
	}
}

// An operation that outlives DrainTimeout is cancelled, and the slot is
// handed over anyway; the target refuses what it still writes.
func TestDrainTimeoutCancelsAndHandsOver(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	short := func(cfg *Config) { cfg.DrainTimeout = 200 * time.Millisecond }
	a := startMember(t, cli, "a", short)
	waitUntil(t, []*member{a}, balanced([]*member{a}))
	slot := -1
	for s := range testSlots {
		if Assign(s, []string{"a", "b"}) == "b" {
			slot = s
			break
		}
	}
	key := keyIn(slot)
	opCtx, release, _ := a.Acquire(context.Background(), key)
	defer release()
	b := startMember(t, cli, "b", short)
	waitUntil(t, []*member{a, b}, func() string {
		if !b.Owns(key) {
			return "b does not own the slot after the drain timeout"
		}
		return ""
	})
	if err := context.Cause(opCtx); !errors.Is(err, ErrDrainTimeout) {
		t.Fatalf("hung op's context: %v, want ErrDrainTimeout", err)
	}
	if err := fencing.Do(opCtx, cli, clientv3.OpPut("/target/x", "late")); !errors.Is(err, fencing.ErrStale) && !errors.Is(err, context.Canceled) {
		t.Fatalf("late write of the hung op: %v, want refused", err)
	}
	if err := fencing.Do(fencing.WithToken(context.Background(), mustToken(t, b.Manager, slot)), cli, clientv3.OpPut("/target/x", "late")); err != nil {
		t.Fatalf("new owner's write: %v", err)
	}
}

func mustToken(t *testing.T, cur *Manager, slot int) fencing.Token {
	t.Helper()
	tok, ok := cur.Token(slot)
	if !ok {
		t.Fatalf("%s does not own slot %d", cur.Name(), slot)
	}
	return tok
}

// A member cut off from etcd drops every slot, cancelling its operations,
// before its lease can expire; the others take the slots after expiry; and
// its writes under the old tokens are refused once it is back.
func TestPartitionedMemberDropsSlotsBeforeExpiry(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	proxy := etcdcluster.NewProxy(t, c.Endpoints()[0])
	cutCli := etcdcluster.NewClient(t, proxy.Endpoint())
	cli := c.Client(t)
	a := startMember(t, cutCli, "a", nil)
	b := startMember(t, cli, "b", nil)
	both := []*member{a, b}
	waitUntil(t, both, balanced(both))
	slot := a.Owned()[0]
	key := keyIn(slot)
	tok, _ := a.Token(slot)
	opCtx, release, _ := a.Acquire(context.Background(), key)
	defer release()

	proxy.Cut()
	waitUntil(t, both, func() string {
		if n := len(a.Owned()); n != 0 {
			return "a still owns slots while cut off"
		}
		return ""
	})
	if err := context.Cause(opCtx); !errors.Is(err, ErrLeaseInDoubt) {
		t.Fatalf("op context of the cut-off member: %v, want ErrLeaseInDoubt", err)
	}
	release() // the cancelled operation ends
	// a stepped down before its claim expired at the server.
	if resp, err := cli.Get(context.Background(), tok.Key); err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("a's claim was gone before a dropped it: %v %v", resp, err)
	}
	waitUntil(t, both, func() string {
		if !b.Owns(key) {
			return "b has not taken a's slots after a's lease expired"
		}
		return ""
	})
	proxy.Restore()
	err := fencing.Do(fencing.WithToken(context.Background(), tok), cutCli, clientv3.OpPut("/target/x", "stale"))
	if !errors.Is(err, fencing.ErrStale) {
		t.Fatalf("write under a's old token: %v, want ErrStale", err)
	}
	// Back, a joins again and gets its share.
	waitUntil(t, both, balanced(both))
}

func TestSlotCountMismatchFailsRun(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	a := startMember(t, cli, "a", nil)
	waitUntil(t, []*member{a}, balanced([]*member{a}))
	m, err := New(Config{Client: cli, Prefix: "/test/shards", Name: "x", Slots: testSlots * 2, TTL: 2 * time.Second}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := m.Run(ctx); !errors.Is(err, ErrSlotsMismatch) {
		t.Fatalf("Run with another slot count: %v, want ErrSlotsMismatch", err)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	cli := &clientv3.Client{}
	for field, cfg := range map[string]Config{
		"Client":       {Prefix: "/p", Name: "a"},
		"Prefix":       {Client: cli, Prefix: "/p/", Name: "a"},
		"Name":         {Client: cli, Prefix: "/p", Name: "a/b"},
		"Slots":        {Client: cli, Prefix: "/p", Name: "a", Slots: -1},
		"TTL":          {Client: cli, Prefix: "/p", Name: "a", TTL: 500 * time.Millisecond},
		"DrainTimeout": {Client: cli, Prefix: "/p", Name: "a", DrainTimeout: -time.Second},
	} {
		_, err := New(cfg, nil)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

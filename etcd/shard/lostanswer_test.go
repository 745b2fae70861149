package shard

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
	"github.com/converge-go/converge/etcd/internal/etcdtest"
	"github.com/converge-go/converge/etcd/internal/lease"
	"github.com/converge-go/converge/etcd/internal/ownership"
)

// lostClaim picks a claim transaction: a Txn of nested transactions.
func lostClaim(txn *pb.TxnRequest) bool {
	return len(txn.Success) > 0 && txn.Success[0].GetRequestTxn() != nil
}

// Finding 7 and row "claim answer lost" of the fault table: a claim that
// etcd applied but whose answer was lost is adopted as this replica's
// claim (the key is under its own lease), with the key's create revision
// as the token, within 2 s; the slots are not orphaned for the life of
// the lease.
func TestLostClaimAnswerIsAdopted(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	loser := &etcdtest.LostAnswer{Match: lostClaim}
	lossy, err := clientv3.New(clientv3.Config{
		Endpoints: c.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop(),
		DialOptions: []grpc.DialOption{loser.DialOption()},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lossy.Close() })
	cli := c.Client(t)
	// A long TTL: the old code's orphaned slots would come back only
	// when the lease expires, far after the bound checked here.
	a := startMember(t, lossy, "a", func(cfg *Config) { cfg.TTL = 10 * time.Second })
	waitUntil(t, []*member{a}, balanced([]*member{a}))
	lost, ok := loser.Lost()
	if !ok {
		t.Fatal("no claim answer was lost: the test did not test anything")
	}
	took := time.Since(lost.At)
	t.Logf("every slot owned %v after the claim's answer was lost", took)
	if took > 2*time.Second {
		t.Fatalf("slots adopted only %v after the lost answer, want within 2s", took)
	}
	resp, err := cli.Get(context.Background(), "/test/shards/slots/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != testSlots {
		t.Fatalf("%d claim keys in etcd, want %d", len(resp.Kvs), testSlots)
	}
	for _, kv := range resp.Kvs {
		slot, _ := strconv.Atoi(strings.TrimPrefix(string(kv.Key), "/test/shards/slots/"))
		tok, ok := a.Token(slot)
		if !ok || tok.Revision != kv.CreateRevision || int64(tok.Lease) != kv.Lease {
			t.Fatalf("slot %d: token %v, etcd holds create revision %d under lease %x", slot, tok, kv.CreateRevision, kv.Lease)
		}
	}
}

// The two ends of an orphan (a slot key under this replica's own lease
// that it does not hold, as a lost claim answer leaves): adopted with its
// create revision as the token when the slot is assigned here, deleted
// when it is assigned to another member, so that member can claim it.
func TestOrphanAdoptedOrReleased(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	ctx := context.Background()
	m, err := New(Config{Client: cli, Prefix: "/test/shards", Name: "a", Slots: testSlots}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := lease.Start(ctx, cli, 10*time.Second, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(ctx)
	ss := &session{m: m, s: s, ctx: ctx, cli: cli,
		members: map[string]bool{"a": true, "b": true}, holders: map[int]holder{},
		held: map[int]*ownership.Claim{}, draining: map[int]bool{},
		unrelease: map[int]*ownership.Claim{}, drained: make(chan drainDone)}
	ss.membersChanged()
	mine, theirs := -1, -1
	for slot, who := range ss.assigned {
		if who == "a" {
			mine = slot
		} else {
			theirs = slot
		}
	}
	orphan := func(slot int) int64 {
		resp, err := cli.Put(ctx, ss.slotKey(slot), "a", clientv3.WithLease(s.Lease()))
		if err != nil {
			t.Fatal(err)
		}
		ss.holders[slot] = holder{name: "a", createRev: resp.Header.Revision, lease: s.Lease()}
		return resp.Header.Revision
	}
	mineRev, _ := orphan(mine), orphan(theirs)
	ss.reconcile()
	if tok, ok := m.Token(mine); !ok || tok.Revision != mineRev || tok.Lease != s.Lease() {
		t.Fatalf("orphan of an assigned slot: token %v (%v), want revision %d", tok, ok, mineRev)
	}
	if m.Owns(keyIn(theirs)) {
		t.Fatal("an orphan of a slot assigned elsewhere was adopted")
	}
	resp, err := cli.Get(ctx, ss.slotKey(theirs))
	if err != nil || len(resp.Kvs) != 0 {
		t.Fatalf("orphan of a slot assigned elsewhere still in etcd: %v, %v", resp, err)
	}
	if len(ss.unrelease) != 0 {
		t.Fatalf("releases left to retry: %v", ss.unrelease)
	}
}

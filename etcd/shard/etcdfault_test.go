package shard

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/fencing"
	"github.com/converge-go/converge/etcd/internal/etcdcluster"
)

// Stopping the etcd leader of a three-member cluster (embed's Close, which
// hands raft leadership to a peer first; a crash or a partition of the etcd
// leader needs real processes) costs one etcd election and nothing else: no slot is dropped or claimed anew (the tokens
// stay), fenced writes under every token succeed once a new etcd leader
// serves, and no owned set changes for a whole TTL after the kill.
func TestEtcdLeaderStoppedKeepsEverySlot(t *testing.T) {
	c := etcdcluster.Start(t, 3)
	cli := c.Client(t)
	ttl := func(cfg *Config) { cfg.TTL = 3 * time.Second }
	ms := []*member{startMember(t, cli, "a", ttl), startMember(t, cli, "b", ttl)}
	waitUntil(t, ms, balanced(ms))
	type owned struct {
		slots  []int
		tokens []fencing.Token
	}
	before := map[string]owned{}
	var changed []reflect.SelectCase
	for _, m := range ms {
		o := owned{slots: m.Owned()}
		for _, s := range o.slots {
			tok, _ := m.Token(s)
			o.tokens = append(o.tokens, tok)
		}
		before[m.Name()] = o
		changed = append(changed, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.Changed())})
	}

	stopped := c.WaitLeader(t)
	c.Stop(stopped)
	if now := c.WaitLeader(t); now == stopped {
		t.Fatal("the stopped member is still leader")
	}
	for name, o := range before {
		for _, tok := range o.tokens {
			ctx, cancel := context.WithTimeout(fencing.WithToken(context.Background(), tok), within)
			err := fencing.Do(ctx, cli, clientv3.OpPut("/target/"+name, tok.Key))
			cancel()
			if err != nil {
				t.Fatalf("fenced write under %s after the etcd leader stopped: %v", tok, err)
			}
		}
	}
	// A whole TTL without any change of ownership: the keepalives came
	// back before any lease was in doubt.
	changed = append(changed, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(time.After(3 * time.Second))})
	if i, _, _ := reflect.Select(changed); i < len(ms) {
		t.Fatalf("%s's owned slots changed after the etcd leader stopped: now %v, were %v",
			ms[i].Name(), ms[i].Owned(), before[ms[i].Name()].slots)
	}
	for _, m := range ms {
		if !slices.Equal(m.Owned(), before[m.Name()].slots) {
			t.Fatalf("%s owns %v, owned %v", m.Name(), m.Owned(), before[m.Name()].slots)
		}
	}
}

package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/shard"
)

// groupWatch follows a shard group in etcd from outside its replicas: the
// live members and who holds each slot's claim, with the time the harness
// saw each claim made. It is how the rows see handovers without reaching
// into a Manager, the same way for replicas in-process and in processes.
type groupWatch struct {
	prefix string
	slots  int
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	members map[string]time.Time // name -> when its key was seen
	claims  map[int]string       // slot -> holder
	claimed []claimEvent         // every claim seen, in order
	freed   map[int]time.Time    // slot -> when its claim was last seen deleted
	err     error
	changed chan struct{} // closed at the next event
}

// claimEvent is one claim of a slot: by whom, and when the harness saw it.
type claimEvent struct {
	slot  int
	owner string
	at    time.Time
}

// watchGroup reads the group at prefix and follows it until stop.
func watchGroup(cli *clientv3.Client, prefix string, slots int) (*groupWatch, error) {
	ctx, cancel := context.WithCancel(context.Background())
	g := &groupWatch{prefix: prefix, slots: slots, cancel: cancel, done: make(chan struct{}),
		members: map[string]time.Time{}, claims: map[int]string{}, freed: map[int]time.Time{},
		changed: make(chan struct{})}
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix())
	if err != nil {
		cancel()
		return nil, err
	}
	now := time.Now()
	for _, kv := range resp.Kvs {
		g.put(string(kv.Key), string(kv.Value), now)
	}
	wch := cli.Watch(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1))
	go g.follow(ctx, wch)
	return g, nil
}

func (g *groupWatch) follow(ctx context.Context, wch clientv3.WatchChan) {
	defer close(g.done)
	for wr := range wch {
		now := time.Now()
		g.mu.Lock()
		if err := wr.Err(); err != nil {
			g.err = err
		}
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut {
				g.put(string(ev.Kv.Key), string(ev.Kv.Value), now)
			} else {
				g.del(string(ev.Kv.Key), now)
			}
		}
		close(g.changed)
		g.changed = make(chan struct{})
		g.mu.Unlock()
	}
	if ctx.Err() == nil {
		g.mu.Lock()
		g.err = fmt.Errorf("watch of %s ended", g.prefix)
		g.mu.Unlock()
	}
}

// put and del update the view; g.mu is held (or g not yet shared).
func (g *groupWatch) put(key, value string, at time.Time) {
	if name, ok := strings.CutPrefix(key, g.prefix+"/members/"); ok {
		g.members[name] = at
		return
	}
	if slot, ok := g.slotOf(key); ok {
		if g.claims[slot] != value {
			g.claimed = append(g.claimed, claimEvent{slot: slot, owner: value, at: at})
		}
		g.claims[slot] = value
	}
}

func (g *groupWatch) del(key string, at time.Time) {
	if name, ok := strings.CutPrefix(key, g.prefix+"/members/"); ok {
		delete(g.members, name)
		return
	}
	if slot, ok := g.slotOf(key); ok {
		delete(g.claims, slot)
		g.freed[slot] = at
	}
}

func (g *groupWatch) slotOf(key string) (int, bool) {
	rest, ok := strings.CutPrefix(key, g.prefix+"/slots/")
	if !ok {
		return 0, false
	}
	s, err := strconv.Atoi(rest)
	return s, err == nil
}

// stop ends the watch.
func (g *groupWatch) stop() {
	g.cancel()
	<-g.done
}

// waitFor waits until cond, evaluated under the lock at every event,
// returns "", or fails after patience with what cond says is wrong.
func (g *groupWatch) waitFor(patience time.Duration, cond func() string) error {
	deadline := time.NewTimer(patience)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		msg, err, ch := cond(), g.err, g.changed
		g.mu.Unlock()
		switch {
		case err != nil:
			return err
		case msg == "":
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			return fmt.Errorf("after %v: %s", patience, msg)
		}
	}
}

// balanced is the condition that exactly the members named are live and
// every slot is claimed by the member rendezvous hashing assigns it to.
func (g *groupWatch) balanced(names ...string) func() string {
	names = slices.Sorted(slices.Values(names))
	return func() string {
		if len(g.members) != len(names) {
			return fmt.Sprintf("%d members, want %v", len(g.members), names)
		}
		for _, n := range names {
			if _, ok := g.members[n]; !ok {
				return fmt.Sprintf("member %s not registered", n)
			}
		}
		for s := range g.slots {
			if want := shard.Assign(s, names); g.claims[s] != want {
				return fmt.Sprintf("slot %d held by %q, assigned to %q", s, g.claims[s], want)
			}
		}
		return ""
	}
}

// memberSeen returns when name's member key was seen.
func (g *groupWatch) memberSeen(name string) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.members[name]
	return at, ok
}

// freedAt returns when slot's claim was last seen deleted.
func (g *groupWatch) freedAt(slot int) (time.Time, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	at, ok := g.freed[slot]
	return at, ok
}

// owners returns a copy of the slot -> holder map.
func (g *groupWatch) owners() map[int]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[int]string, len(g.claims))
	for s, o := range g.claims {
		out[s] = o
	}
	return out
}

// claimsSince returns the claims seen after the first n, and the count of
// claims seen so far.
func (g *groupWatch) claimsSince(n int) ([]claimEvent, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.claimed[n:]), len(g.claimed)
}

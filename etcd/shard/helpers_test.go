package shard

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// within bounds every wait; it never paces one.
const within = 20 * time.Second

const testSlots = 32

type member struct {
	*Manager
	stop func()
}

func startMember(t testing.TB, cli *clientv3.Client, name string, tune func(*Config)) *member {
	t.Helper()
	cfg := Config{Client: cli, Prefix: "/test/shards", Name: name, Slots: testSlots, TTL: 2 * time.Second, RetryInterval: 100 * time.Millisecond}
	if tune != nil {
		tune(&cfg)
	}
	m, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := m.Run(ctx); err != nil {
			t.Errorf("%s: Run: %v", name, err)
		}
	}()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return &member{Manager: m, stop: stop}
}

// waitUntil re-evaluates cond whenever any member's owned set changes,
// until it returns "" (else it says what is still wrong).
func waitUntil(t testing.TB, ms []*member, cond func() string) {
	t.Helper()
	deadline := time.After(within)
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)}}
		for _, m := range ms {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(m.Changed())})
		}
		msg := cond()
		if msg == "" {
			return
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			t.Fatalf("after %v: %s", within, msg)
		}
	}
}

// balanced is the condition that ms own every slot between them, each the
// slots rendezvous hashing gives it, and no slot twice.
func balanced(ms []*member) func() string {
	return func() string {
		names := make([]string, len(ms))
		for i, m := range ms {
			names[i] = m.Name()
		}
		owner := map[int]string{}
		for _, m := range ms {
			for _, s := range m.Owned() {
				if o, dup := owner[s]; dup {
					return fmt.Sprintf("slot %d owned by %s and %s", s, o, m.Name())
				}
				owner[s] = m.Name()
			}
		}
		for s := range testSlots {
			if want := Assign(s, names); owner[s] != want {
				return fmt.Sprintf("slot %d owned by %q, assigned to %q", s, owner[s], want)
			}
		}
		return ""
	}
}

// keyIn returns a key whose slot is s.
func keyIn(s int) []byte {
	for i := 0; ; i++ {
		k := fmt.Appendf(nil, "key-%d", i)
		if SlotOf(k, testSlots) == s {
			return k
		}
	}
}

// ownersOf returns the slot -> owner map of ms.
func ownersOf(ms []*member) map[int]string {
	owner := map[int]string{}
	for _, m := range ms {
		for _, s := range m.Owned() {
			owner[s] = m.Name()
		}
	}
	return owner
}

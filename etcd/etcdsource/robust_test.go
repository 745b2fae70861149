package etcdsource_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"iter"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cilium/statedb"

	"github.com/converge-go/converge/etcd/etcdsource"
	"github.com/converge-go/converge/etcd/internal/etcdtest"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// Finding 16: Prefix "" lists (and watches) every key.
func TestEmptyPrefixListsEverything(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	srv.Put(ctx, "/a", "1")
	srv.Put(ctx, "/desired/b", "2")
	f := start(t, srv.Client(srv.Endpoint()), func(c *etcdsource.Config[*obj], _ reconciler.Params) error {
		c.Prefix = ""
		c.Decode = func(kv etcdsource.KeyValue) ([]*obj, error) {
			return []*obj{{Key: kv.Key, Value: string(kv.Value)}}, nil
		}
		return nil
	})
	f.wait("every key", f.is("/a=1 /desired/b=2"))
	srv.Put(ctx, "/c", "3")
	f.wait("the watch", f.is("/a=1 /c=3 /desired/b=2"))
	if !f.src.Status().Initialized {
		t.Fatal("not initialized")
	}
}

// Finding 5 (item 4): etcd stopped, or cut off behind a proxy, makes the
// source Degraded with the time since the last contact, within
// StaleAfter; back, it is OK again. The watch is quiet throughout: only
// progress notifications prove it alive.
func TestStaleWhileEtcdUnreachable(t *testing.T) {
	for _, how := range []string{"stopped", "cut"} {
		t.Run(how, func(t *testing.T) {
			srv := etcdtest.Start(t)
			srv.Put(context.Background(), prefix+"a", "1")
			proxy := srv.Proxy()
			f := start(t, srv.Client(proxy.Endpoint()), func(c *etcdsource.Config[*obj], _ reconciler.Params) error {
				c.Source.StaleAfter = 1500 * time.Millisecond
				return nil
			})
			f.wait("a", f.is("a=1"))
			// Quiet for two bounds: only progress notifications can move
			// the last contact on, and keep the source OK.
			first := f.src.Status().LastContact
			f.waitStatus(func(s source.StatusSnapshot) bool {
				return s.LastContact.Sub(first) > 3*time.Second && s.Healthy()
			})
			if how == "stopped" {
				srv.Stop()
			} else {
				proxy.Cut()
			}
			s := f.waitStatus(func(s source.StatusSnapshot) bool { return s.Stale() })
			if msg := s.HealthMessage(); s.Healthy() || !strings.Contains(msg, "no contact with the store for") {
				t.Fatalf("health %q", msg)
			}
			if how == "stopped" {
				srv.Restart()
			} else {
				proxy.Restore()
			}
			f.waitStatus(func(s source.StatusSnapshot) bool { return s.Healthy() })
		})
	}
}

// target is an outside world that outlives the agent's process.
type target struct {
	mu      sync.Mutex
	objs    map[string]string
	removed []string // by Prune or Delete
}

func (tg *target) Update(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, o *obj) error {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	tg.objs[o.Key] = o.Value
	return nil
}

func (tg *target) Delete(_ context.Context, _ statedb.ReadTxn, _ statedb.Revision, o *obj) error {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	delete(tg.objs, o.Key)
	tg.removed = append(tg.removed, o.Key)
	return nil
}

func (tg *target) Prune(_ context.Context, _ statedb.ReadTxn, objs iter.Seq2[*obj, statedb.Revision]) error {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	keep := map[string]bool{}
	for o := range objs {
		keep[o.Key] = true
	}
	for k := range tg.objs {
		if !keep[k] {
			delete(tg.objs, k)
			tg.removed = append(tg.removed, k)
		}
	}
	return nil
}

func (tg *target) snapshot() (map[string]string, []string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	return maps.Clone(tg.objs), append([]string(nil), tg.removed...)
}

// Finding 1 on etcd: a value that fails to decode, put while the agent
// was down, does not make the next run prune that object from the
// target: the table stays uninitialized, health names the key, and the
// good objects are reconciled. Fixing the value initializes the table.
func TestRestartWithBadValue(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	srv.Put(ctx, prefix+"db", "5432")
	srv.Put(ctx, prefix+"web", "80")
	tg := &target{objs: map[string]string{}}
	run := func() *fixture {
		var rec reconciler.Reconciler[*obj]
		f := start(t, srv.Client(srv.Endpoint()), func(c *etcdsource.Config[*obj], rp reconciler.Params) (err error) {
			c.Decode = func(kv etcdsource.KeyValue) ([]*obj, error) {
				if strings.HasPrefix(string(kv.Value), "[") {
					return nil, errors.New("line 1: did not find expected ']'")
				}
				return []*obj{{Key: strings.TrimPrefix(kv.Key, prefix), Value: string(kv.Value)}}, nil
			}
			rec, err = reconciler.New(reconciler.Config[*obj]{
				Table:           c.Source.Table,
				GetObjectStatus: func(o *obj) reconciler.Status { return o.Status },
				SetObjectStatus: func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
				CloneObject:     func(o *obj) *obj { c := *o; return &c },
				Operations:      tg,
			}, rp)
			return err
		})
		_ = rec
		return f
	}
	f := run()
	f.wait("both", f.is("db=5432 web=80"))
	waitTarget(t, tg, map[string]string{"db": "5432", "web": "80"})
	f.stop()

	srv.Put(ctx, prefix+"db", "[5432")
	srv.Put(ctx, prefix+"web", "8080")
	f = run()
	waitTarget(t, tg, map[string]string{"db": "5432", "web": "8080"})
	s := f.waitStatus(func(s source.StatusSnapshot) bool { return s.Relists == 1 })
	if s.Initialized || !strings.Contains(s.HealthMessage(), prefix+"db: line 1") || !strings.Contains(s.HealthMessage(), "table not initialized") {
		t.Fatalf("status %+v, health %q", s, s.HealthMessage())
	}
	srv.Put(ctx, prefix+"db", "6543")
	waitTarget(t, tg, map[string]string{"db": "6543", "web": "8080"})
	f.waitStatus(func(s source.StatusSnapshot) bool { return s.Initialized && s.Healthy() })
	if _, removed := tg.snapshot(); len(removed) != 0 {
		t.Fatalf("removed from the target: %v", removed)
	}
}

// waitTarget waits (polling, bounded) until the target holds want.
func waitTarget(t *testing.T, tg *target, want map[string]string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		got, _ := tg.snapshot()
		if maps.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("target %v, want %v", got, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Finding 3 on etcd: a value that fails to decode is reported (health,
// Status) with no more than a short prefix of what it quotes: a JSON
// decoder names an unknown field whole.
func TestDecodeErrorsQuoteShortPrefixes(t *testing.T) {
	srv := etcdtest.Start(t)
	secret := "root:$6$Hx1rOq2JfQYz0t4j$Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Lw0123456789:19000:0:99999:7:::"
	srv.Put(context.Background(), prefix+"db", `{"size": 1, "`+secret+`": 2}`)
	f := start(t, srv.Client(srv.Endpoint()), func(c *etcdsource.Config[*obj], _ reconciler.Params) error {
		c.Decode = func(kv etcdsource.KeyValue) ([]*obj, error) {
			var spec struct{ Size int }
			dec := json.NewDecoder(bytes.NewReader(kv.Value))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&spec); err != nil {
				return nil, err
			}
			return []*obj{{Key: strings.TrimPrefix(kv.Key, prefix), Value: string(kv.Value)}}, nil
		}
		return nil
	})
	s := f.waitStatus(func(s source.StatusSnapshot) bool { return s.FailingCount == 1 })
	msg := s.Failing[0].Error
	if !strings.Contains(msg, "unknown field") {
		t.Fatalf("error %q", msg)
	}
	for i := 0; i+source.MaxQuoted < len(secret); i++ {
		if strings.Contains(msg, secret[i:i+source.MaxQuoted+1]) || strings.Contains(s.HealthMessage(), secret[i:i+source.MaxQuoted+1]) {
			t.Fatalf("error %q quotes more than %d bytes of the value", msg, source.MaxQuoted)
		}
	}
}

package etcdsource_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	"github.com/cilium/statedb/index"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/etcdsource"
	"github.com/converge-go/converge/etcd/internal/etcdtest"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

const prefix = "/desired/"

type obj struct {
	Key, Value string
	Status     reconciler.Status
}

func (o *obj) TableHeader() []string { return []string{"Key", "Value"} }
func (o *obj) TableRow() []string    { return []string{o.Key, o.Value} }

var keyIndex = statedb.Index[*obj, string]{
	Name:       "key",
	FromObject: func(o *obj) index.KeySet { return index.NewKeySet(index.String(o.Key)) },
	FromKey:    index.String,
	FromString: index.FromString,
	Unique:     true,
}

type fixture struct {
	t     *testing.T
	db    *statedb.DB
	table statedb.RWTable[*obj]
	src   source.Source
	stop  func() // stops the hive (once)
}

// start runs a hive with an etcd source of prefix over client; tune
// changes its config, and may add to the module (a reconciler).
func start(t *testing.T, client *clientv3.Client, tune ...func(*etcdsource.Config[*obj], reconciler.Params) error) *fixture {
	t.Helper()
	f := &fixture{t: t}
	f.stop = func() {}
	log := hivetest.Logger(t, hivetest.LogLevel(slog.LevelError))
	h := hive.New(
		statedb.Cell, job.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("test", "Test",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p source.Params, rp reconciler.Params) (err error) {
				f.db = db
				if f.table, err = statedb.NewTable(db, "objects", keyIndex); err != nil {
					return err
				}
				cfg := etcdsource.Config[*obj]{
					Client: client,
					Prefix: prefix,
					Decode: func(kv etcdsource.KeyValue) ([]*obj, error) {
						return []*obj{{Key: strings.TrimPrefix(kv.Key, prefix), Value: string(kv.Value)}}, nil
					},
					Source: source.Config[etcdsource.KeyValue, *obj]{
						Name:       "etcd",
						Table:      f.table,
						Equal:      func(a, b *obj) bool { return a.Key == b.Key && a.Value == b.Value },
						Pending:    func(o *obj) *obj { o.Status = reconciler.StatusPending(); return o },
						BufferWait: time.Millisecond,
						BackoffMin: 10 * time.Millisecond,
						BackoffMax: 200 * time.Millisecond,
					},
				}
				for _, fn := range tune {
					if err := fn(&cfg, rp); err != nil {
						return err
					}
				}
				f.src, err = etcdsource.New(cfg, p)
				return err
			}),
		),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	if err := h.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	stopped := false
	f.stop = func() {
		if !stopped {
			stopped = true
			if err := h.Stop(log, context.Background()); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(f.stop)
	return f
}

// wait waits, on table changes, until cond holds, for at most a minute.
func (f *fixture) wait(what string, cond func(txn statedb.ReadTxn) bool) {
	f.t.Helper()
	deadline := time.After(time.Minute)
	for {
		txn := f.db.ReadTxn()
		_, watch := f.table.AllWatch(txn)
		initialized, initWatch := f.table.Initialized(txn)
		if initialized {
			initWatch = nil // closed: it would spin
		}
		if cond(txn) {
			return
		}
		select {
		case <-watch:
		case <-initWatch:
		case <-deadline:
			f.t.Fatalf("timed out waiting for %s; status %+v", what, f.src.Status())
		}
	}
}

// waitStatus polls the source's status (every 2 ms, for at most a
// minute) until cond holds.
func (f *fixture) waitStatus(cond func(source.StatusSnapshot) bool) source.StatusSnapshot {
	f.t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(time.Minute)
	for {
		s := f.src.Status()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("status never matched: %+v", s)
		}
		<-tick.C
	}
}

// is returns a condition: the table holds exactly want (key=value pairs,
// sorted by key).
func (f *fixture) is(want string) func(txn statedb.ReadTxn) bool {
	return func(txn statedb.ReadTxn) bool {
		var got []string
		for o := range f.table.All(txn) {
			got = append(got, o.Key+"="+o.Value)
		}
		return strings.Join(got, " ") == want
	}
}

// The server restarts while the source watches: changes made after the
// restart arrive, without a relist.
func TestServerRestartWhileWatching(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	srv.Put(ctx, prefix+"a", "1")
	f := start(t, srv.Client(srv.Endpoint()))
	f.wait("a", f.is("a=1"))
	srv.Put(ctx, prefix+"b", "1")
	f.wait("b", f.is("a=1 b=1"))

	began := time.Now()
	srv.Restart()
	t.Logf("restart took %s", time.Since(began))
	srv.Put(ctx, prefix+"a", "2")
	srv.Delete(ctx, prefix+"b")
	srv.Put(ctx, "/elsewhere/c", "1")
	f.wait("changes after the restart", f.is("a=2"))
	if s := f.src.Status(); s.Relists != 1 {
		t.Fatalf("%d relists, want only the initial one: the watch resumes", s.Relists)
	}
}

// A key deleted while the source is cut off is deleted once it is back:
// the watch resumes from the last revision it saw.
func TestKeyDeletedWhileDisconnected(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	srv.Put(ctx, prefix+"a", "1")
	srv.Put(ctx, prefix+"b", "1")
	proxy := srv.Proxy()
	f := start(t, srv.Client(proxy.Endpoint()))
	f.wait("a and b", f.is("a=1 b=1"))

	proxy.Cut()
	srv.Delete(ctx, prefix+"a")
	srv.Put(ctx, prefix+"b", "2")
	proxy.Restore()
	f.wait("the delete", f.is("b=2"))
	if s := f.src.Status(); s.Relists != 1 {
		t.Fatalf("%d lists, want the initial one only: the watch resumes from its revision", s.Relists)
	}
}

// etcd compacts past the source's revision while the source is cut off:
// the resumed watch fails with ErrCompacted, the source relists, and the
// keys deleted meanwhile are deleted in the relist.
func TestCompactionWhileDisconnected(t *testing.T) {
	srv := etcdtest.Start(t)
	ctx := context.Background()
	for _, k := range []string{"a", "b", "c"} {
		srv.Put(ctx, prefix+k, "1")
	}
	proxy := srv.Proxy()
	f := start(t, srv.Client(proxy.Endpoint()))
	f.wait("a, b and c", f.is("a=1 b=1 c=1"))

	proxy.Cut()
	srv.Delete(ctx, prefix+"a")
	srv.Put(ctx, prefix+"b", "2")
	srv.Put(ctx, prefix+"d", "1")
	srv.Compact(ctx)
	proxy.Restore()
	f.wait("the relist", f.is("b=2 c=1 d=1"))
	// The status is recorded just after the commit.
	s := f.waitStatus(func(s source.StatusSnapshot) bool { return s.Relists == 2 })
	if s.LastRelist.Reason != source.ReasonExpired || s.LastRelist.Deletes != 1 || s.LastRelist.Upserts != 2 {
		t.Fatalf("last relist %+v, want expired with 2 upserts and 1 delete", s.LastRelist)
	}
}

// 100k keys at start are listed in pages at one revision and committed
// with the initializer in one transaction.
func TestHundredThousandKeysAtStart(t *testing.T) {
	const n = 100_000
	srv := etcdtest.Start(t, etcdtest.WithMaxTxnOps(10000))
	ctx := context.Background()
	srv.Load(ctx, n, func(i int) string { return fmt.Sprintf("%sk%06d", prefix, i) }, func(int) string { return "v" })
	began := time.Now()
	f := start(t, srv.Client(srv.Endpoint()))
	f.wait("100k keys", func(txn statedb.ReadTxn) bool {
		init, _ := f.table.Initialized(txn)
		if init && f.table.NumObjects(txn) != n {
			t.Fatalf("initialized with %d objects, want %d", f.table.NumObjects(txn), n)
		}
		return init
	})
	t.Logf("100k keys listed into the table in %s", time.Since(began))
	srv.Put(ctx, prefix+"k000000", "w")
	f.wait("a change after the list", func(txn statedb.ReadTxn) bool {
		o, _, ok := f.table.Get(txn, keyIndex.Query("k000000"))
		return ok && o.Value == "w"
	})
}

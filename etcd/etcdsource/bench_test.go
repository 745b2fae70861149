package etcdsource_test

import (
	"context"
	"fmt"
	"iter"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/job"
	"github.com/cilium/statedb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/etcdsource"
	"github.com/converge-go/converge/etcd/internal/etcdtest"
	"github.com/converge-go/converge/reconciler"
	"github.com/converge-go/converge/source"
)

// The etcd rows of issue 19's benchmark table; scripts/bench.sh runs them
// after the core module's benchmarks:
//
//	cd etcd && go test -run '^$' -bench . -benchtime 1x ./etcdsource/

type noopOps struct{}

func (noopOps) Update(context.Context, statedb.ReadTxn, statedb.Revision, *obj) error { return nil }
func (noopOps) Delete(context.Context, statedb.ReadTxn, statedb.Revision, *obj) error { return nil }
func (noopOps) Prune(context.Context, statedb.ReadTxn, iter.Seq2[*obj, statedb.Revision]) error {
	return nil
}

// benchHive runs an etcd source of prefix and a converge reconciler whose
// target does nothing, so that objects become Done.
func benchHive(b *testing.B, client *clientv3.Client) *fixture {
	f := &fixture{}
	log := slog.New(slog.DiscardHandler)
	h := hive.New(
		statedb.Cell, job.Cell,
		cell.Provide(cell.NewSimpleHealth),
		cell.Module("bench", "Benchmark",
			cell.Provide(job.Registry.NewGroup),
			cell.Invoke(func(db *statedb.DB, p source.Params, rp reconciler.Params) (err error) {
				f.db = db
				if f.table, err = statedb.NewTable(db, "objects", keyIndex); err != nil {
					return err
				}
				if err := reconciler.Register(reconciler.Config[*obj]{
					Table:                      f.table,
					GetObjectStatus:            func(o *obj) reconciler.Status { return o.Status },
					SetObjectStatus:            func(o *obj, s reconciler.Status) *obj { o.Status = s; return o },
					CloneObject:                func(o *obj) *obj { c := *o; return &c },
					Operations:                 noopOps{},
					FullReconciliationInterval: reconciler.Off,
					RefreshInterval:            reconciler.Off,
				}, rp); err != nil {
					return err
				}
				f.src, err = etcdsource.New(etcdsource.Config[*obj]{
					Client: client,
					Prefix: prefix,
					Decode: func(kv etcdsource.KeyValue) ([]*obj, error) {
						return []*obj{{Key: strings.TrimPrefix(kv.Key, prefix), Value: string(kv.Value)}}, nil
					},
					Source: source.Config[etcdsource.KeyValue, *obj]{
						Name:    "etcd",
						Table:   f.table,
						Equal:   func(a, b *obj) bool { return a.Key == b.Key && a.Value == b.Value },
						Pending: func(o *obj) *obj { o.Status = reconciler.StatusPending(); return o },
					},
				}, p)
				return err
			}),
		),
	)
	if err := h.Start(log, context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { h.Stop(log, context.Background()) })
	return f
}

// waitDone blocks until key has value and is Done, waking on the key's
// own watch channel.
func (f *fixture) waitDone(b *testing.B, key, value string) {
	deadline := time.After(time.Minute)
	for {
		o, _, watch, ok := f.table.GetWatch(f.db.ReadTxn(), keyIndex.Query(key))
		if ok && o.Value == value && o.Status.Kind == reconciler.StatusKindDone {
			return
		}
		select {
		case <-watch:
		case <-deadline:
			b.Fatalf("%s=%s not Done after a minute", key, value)
		}
	}
}

// BenchmarkList100k: 100k keys in etcd, listed into the table at start;
// objects/s from the hive's start until the table is initialized.
func BenchmarkList100k(b *testing.B) {
	const n = 100_000
	srv := etcdtest.Start(b, etcdtest.WithMaxTxnOps(10000))
	srv.Load(context.Background(), n, func(i int) string { return fmt.Sprintf("%sk%06d", prefix, i) }, func(int) string { return "v" })
	for b.Loop() {
		began := time.Now()
		f := benchHive(b, srv.Client(srv.Endpoint()))
		for {
			init, watch := f.table.Initialized(f.db.ReadTxn())
			if init {
				break
			}
			<-watch
		}
		b.ReportMetric(n/time.Since(began).Seconds(), "objects/s")
	}
}

// BenchmarkPutToDone: a trickle of 500 puts per second, each timed from
// just before the put until its object is Done in the table; p50 and p99
// in ms.
func BenchmarkPutToDone(b *testing.B) {
	const samples, period = 1000, 2 * time.Millisecond
	srv := etcdtest.Start(b)
	client := srv.Client(srv.Endpoint())
	f := benchHive(b, client)
	ctx := context.Background()
	for b.Loop() {
		lat := make([]float64, 0, samples)
		next := time.Now()
		for i := range samples {
			time.Sleep(time.Until(next))
			next = next.Add(period)
			key, value := fmt.Sprintf("k%03d", i%100), fmt.Sprintf("v%d", i)
			t0 := time.Now()
			if _, err := client.Put(ctx, prefix+key, value); err != nil {
				b.Fatal(err)
			}
			f.waitDone(b, key, value)
			lat = append(lat, float64(time.Since(t0))/float64(time.Millisecond))
		}
		slices.Sort(lat)
		b.ReportMetric(lat[len(lat)/2], "p50-ms")
		b.ReportMetric(lat[len(lat)*99/100], "p99-ms")
	}
}

package etcdsource_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/converge-go/converge/etcd/etcdsource"
	"github.com/converge-go/converge/etcd/internal/etcdtest"
)

// Item 7: a list pages by bytes as well as by keys. Forty values of
// 200 KiB came back in one response of 8 MiB with PageBytes at 1 MiB
// (pages of 10,000 keys whatever their size: up to 15 GB of 1.5 MiB
// values); now no response holds much more than PageBytes, and small
// keys still come in few round trips.
func TestListPagesByBytes(t *testing.T) {
	srv := etcdtest.Start(t, etcdtest.WithMaxTxnOps(1000))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const big, pageBytes = 200 << 10, 1 << 20
	for i := range 40 {
		srv.Put(ctx, fmt.Sprintf("%sbig-%02d", prefix, i), strings.Repeat("v", big))
	}
	srv.Load(ctx, 3000, func(i int) string { return fmt.Sprintf("%ssmall-%04d", prefix, i) },
		func(int) string { return "x" })

	var ranges etcdtest.Ranges
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{ranges.DialOption()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	lw := etcdsource.NewListerWatcher(cli, prefix, 1000)
	lw.PageBytes = pageBytes
	res, err := lw.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Items) != 3040 || res.Items[0].Key != prefix+"big-00" || res.Items[3039].Key != prefix+"small-2999" {
		t.Fatalf("%d items, first %q", len(res.Items), res.Items[0].Key)
	}
	for i := 1; i < len(res.Items); i++ {
		if res.Items[i-1].Key >= res.Items[i].Key {
			t.Fatalf("items out of order at %d: %q, %q", i, res.Items[i-1].Key, res.Items[i].Key)
		}
	}
	answers := ranges.Answers()
	for _, a := range answers {
		if a.Bytes > pageBytes+big {
			t.Errorf("a page of %d keys, %d bytes: over PageBytes by more than one value", a.Keys, a.Bytes)
		}
	}
	// 40 big values in pages of at most 5, then 3000 small keys in
	// pages that grow eightfold to 1000.
	if len(answers) > 20 {
		t.Errorf("%d round trips: %+v", len(answers), answers)
	}
	t.Logf("%d pages: %+v", len(answers), answers)
}

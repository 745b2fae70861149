package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"

	"github.com/converge-go/converge/etcd/internal/etcdtest"
)

// publishOwner writes, by hand, a group of one slot at /test/shards that
// replica r1 owns and whose summary covers the desired state up to
// covers.
func publishOwner(t *testing.T, srv *etcdtest.Server, covers int64) {
	t.Helper()
	ctx := context.Background()
	srv.Put(ctx, "/test/shards/slots", "1")
	srv.Put(ctx, "/test/shards/slots/0", "r1")
	srv.Put(ctx, "/test/shards/members/r1", "")
	s, err := json.Marshal(Summary{Name: "r1", Slots: []int{0}, Report: Report{Covers: covers}})
	if err != nil {
		t.Fatal(err)
	}
	srv.Put(ctx, "/test/shards/summary/r1", string(s))
}

// Item 7: the view reads the desired keys in pages (it read all of them,
// twice, in one response each, on every GET), and only as far as the
// first key newer than what the summaries cover; a changed or deleted key
// still makes the view not covered.
func TestViewReadsDesiredKeysInPages(t *testing.T) {
	defer func(n int64) { viewPageSize = n }(viewPageSize)
	viewPageSize = 1000
	srv := etcdtest.Start(t, etcdtest.WithMaxTxnOps(1000))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	srv.Load(ctx, 2500, func(i int) string { return fmt.Sprintf("/test/desired/k%04d", i) }, func(int) string { return "v" })
	covers := srv.Put(ctx, "/test/other", "")
	publishOwner(t, srv, covers)

	var ranges etcdtest.Ranges
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{ranges.DialOption()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	read := func() View {
		t.Helper()
		ranges.Reset()
		v, err := ReadView(ctx, cli, "/test/shards", "/test/desired/")
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range ranges.Answers() {
			if int64(a.Keys) > viewPageSize {
				t.Fatalf("a read returned %d keys, over the page size %d", a.Keys, viewPageSize)
			}
		}
		return v
	}
	if v := read(); !v.Covered || !v.Done {
		t.Fatalf("unchanged desired state: %+v", v)
	}
	srv.Put(ctx, "/test/desired/k2000", "changed")
	if v := read(); v.Covered || v.Done {
		t.Fatalf("a key changed after what the summary covers: %+v", v)
	}
	publishOwner(t, srv, srv.Put(ctx, "/test/other", ""))
	if v := read(); !v.Covered {
		t.Fatalf("covered again: %+v", v)
	}
	srv.Delete(ctx, "/test/desired/k0001")
	if v := read(); v.Covered {
		t.Fatalf("a key deleted after what the summary covers: %+v", v)
	}
}

// Item 7: ViewHandler reads one view at a time, however many clients poll
// it at once.
func TestViewHandlerReadsOneAtATime(t *testing.T) {
	srv := etcdtest.Start(t)
	publishOwner(t, srv, srv.Put(context.Background(), "/test/desired/x", "1"))
	var ranges etcdtest.Ranges
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second,
		DialOptions: []grpc.DialOption{ranges.DialOption()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	hs := httptest.NewServer(ViewHandler(cli, "/test/shards", "/test/desired/"))
	defer hs.Close()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Get(hs.URL)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	if n := ranges.MaxInFlight(); n != 1 {
		t.Fatalf("%d reads of etcd at once", n)
	}
}

// A request never gets the result of a read that was in progress when it
// came (it may predate the change the request asks about); requests that
// come during a read share the next one; reads never overlap.
func TestViewFlightSharesOnlyNewerReads(t *testing.T) {
	var f flight
	var started, running, maxRunning atomic.Int64
	firstStarted, releaseFirst := make(chan struct{}), make(chan struct{})
	read := func(context.Context) (View, error) {
		n := started.Add(1)
		r := running.Add(1)
		defer running.Add(-1)
		for m := maxRunning.Load(); r > m && !maxRunning.CompareAndSwap(m, r); m = maxRunning.Load() {
		}
		if n == 1 {
			close(firstStarted)
			<-releaseFirst
		}
		return View{Revision: n}, nil
	}
	do := func(into chan<- int64) {
		v, err := f.do(context.Background(), read)
		if err != nil {
			t.Error(err)
		}
		into <- v.Revision
	}
	first, later := make(chan int64, 1), make(chan int64, 3)
	go do(first)
	<-firstStarted
	// Three requests come while the first read is in progress (or just
	// after it: either way they must not get it).
	for range 3 {
		go do(later)
	}
	close(releaseFirst)
	if got := <-first; got != 1 {
		t.Fatalf("the first request got read %d", got)
	}
	for range 3 {
		if got := <-later; got < 2 {
			t.Fatal("a request got the read that was in progress when it came")
		}
	}
	if maxRunning.Load() != 1 || started.Load() > 4 {
		t.Fatalf("%d reads at once, %d reads", maxRunning.Load(), started.Load())
	}
}

package shard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/internal/etcdcluster"
	"github.com/converge-go/converge/reconciler"
)

// waitView re-reads the view at every change under the group's prefix
// until cond holds, and returns that view.
func waitView(t *testing.T, cli *clientv3.Client, cond func(View) bool) View {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	wch := cli.Watch(ctx, "/test/shards/", clientv3.WithPrefix())
	for {
		v, err := ReadView(ctx, cli, "/test/shards", "/test/desired/")
		if err != nil {
			t.Fatal(err)
		}
		if cond(v) {
			return v
		}
		select {
		case <-wch:
		case <-ctx.Done():
			t.Fatalf("view never met the condition; last: %+v", v)
		}
	}
}

// Each replica publishes its slots and counts; the view sums them and says
// Done only when every slot is claimed by a replica that lists it, no
// object is outstanding anywhere, and every summary covers the desired
// state's last change, a delete included (finding 10). A replica that
// stops takes its summary with it.
func TestViewAggregatesSummaries(t *testing.T) {
	c := etcdcluster.Start(t, 1)
	cli := c.Client(t)
	put, err := cli.Put(context.Background(), "/test/desired/x", "1")
	if err != nil {
		t.Fatal(err)
	}
	var pendingA, covers atomic.Int64
	pendingA.Store(2)
	report := func(pending *atomic.Int64, done, unset int) func(*Config) {
		return func(cfg *Config) {
			cfg.SummaryInterval = 50 * time.Millisecond
			cfg.Report = func() Report {
				var p int
				if pending != nil {
					p = int(pending.Load())
				}
				return Report{Objects: reconciler.ObjectCounts{Pending: p, Done: done, Unset: unset}, Covers: covers.Load()}
			}
		}
	}
	a := startMember(t, cli, "a", report(&pendingA, 10, 0))
	b := startMember(t, cli, "b", report(nil, 5, 3)) // Unset objects ask nothing: no bar to Done
	both := []*member{a, b}
	waitUntil(t, both, balanced(both))

	v := waitView(t, cli, func(v View) bool { return len(v.Replicas) == 2 && len(v.Moving) == 0 })
	if v.Done || v.Objects.Pending != 2 || v.Objects.Done != 15 || v.Objects.Unset != 3 || v.Claimed != testSlots || v.Slots != testSlots {
		t.Fatalf("view with a's 2 pending: %+v", v)
	}
	srv := httptest.NewServer(ViewHandler(cli, "/test/shards", "/test/desired/"))
	defer srv.Close()
	if code := getCode(t, srv.URL); code != http.StatusServiceUnavailable {
		t.Fatalf("endpoint while not done: %d, want 503", code)
	}

	pendingA.Store(0)
	v = waitView(t, cli, func(v View) bool { return v.Objects.Pending == 0 })
	if v.Done || v.Covered {
		t.Fatalf("view Done with summaries that cover no desired revision: %+v", v)
	}
	covers.Store(put.Header.Revision)
	waitView(t, cli, func(v View) bool { return v.Done })
	if code := getCode(t, srv.URL); code != http.StatusOK {
		t.Fatalf("endpoint when done: %d, want 200", code)
	}
	deleteUncovers(t, cli, &covers)

	b.stop()
	v = waitView(t, cli, func(v View) bool { return len(v.Replicas) == 1 && v.Done })
	if v.Replicas[0].Name != "a" || len(v.Replicas[0].Slots) != testSlots {
		t.Fatalf("after b stopped: %+v", v)
	}
}

// deleteUncovers deletes the desired key: the summaries no longer cover
// the desired state, though no key has a newer revision than they cover,
// until covers says they do.
func deleteUncovers(t *testing.T, cli *clientv3.Client, covers *atomic.Int64) {
	t.Helper()
	del, err := cli.Delete(context.Background(), "/test/desired/x")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := ReadView(context.Background(), cli, "/test/shards", "/test/desired/"); err != nil || v.Done || v.Covered {
		t.Fatalf("view after a delete the summaries do not cover: %+v, %v", v, err)
	}
	covers.Store(del.Header.Revision)
	waitView(t, cli, func(v View) bool { return v.Done })
}

func getCode(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var v View
	if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
		t.Fatalf("endpoint body: %v", err)
	}
	return resp.StatusCode
}

func TestPublisherRateLimitsCountsNotSlots(t *testing.T) {
	p := publisher{interval: time.Second}
	t0 := time.Now()
	s := Summary{Slots: []int{1, 2}}
	if !p.due(s, t0) {
		t.Fatal("first summary not due")
	}
	p.last, p.lastAt = s, t0
	counts := s
	counts.Report.Objects.Done = 1
	if p.due(counts, t0.Add(time.Millisecond)) {
		t.Fatal("a change of counts within the interval was due")
	}
	if !p.due(counts, t0.Add(time.Second)) {
		t.Fatal("a change of counts after the interval was not due")
	}
	if !p.due(Summary{Slots: []int{1}}, t0.Add(time.Millisecond)) {
		t.Fatal("a change of slots was not due at once")
	}
	if p.due(s, t0.Add(time.Hour)) {
		t.Fatal("an unchanged summary was due")
	}
}

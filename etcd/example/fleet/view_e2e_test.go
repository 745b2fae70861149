package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/shard"
)

// viewPoller asks a replica's GET /view every 50 ms, as a deploy gate
// would, and checks every Done answer against the fleet as of the
// revision the view was read at: a Done while a desired group is not
// applied at its spec is an early Done (finding 10).
type viewPoller struct {
	e       *e2e
	replica string

	mu          sync.Mutex
	polls, done int
	early       []string
}

func (p *viewPoller) run(ctx context.Context) {
	url := "http://" + p.e.replicas[p.replica].IP + ":8080/view"
	ticker := time.NewTicker(50 * time.Millisecond)
	defer ticker.Stop()
	for {
		p.poll(ctx, url)
		select {
		case <-ticker.C:
		case <-ctx.Done():
			return
		}
	}
}

func (p *viewPoller) poll(ctx context.Context, url string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := p.e.http.Do(req)
	if err != nil {
		return // the replica is busy or stopping: no answer is no Done
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p.mu.Lock()
	p.polls++
	p.mu.Unlock()
	if resp.StatusCode != http.StatusOK {
		return
	}
	var v shard.View
	if err := json.Unmarshal(body, &v); err != nil || !v.Done {
		p.e.t.Errorf("200 from /view without a Done view: %v: %s", err, body)
		return
	}
	wrong := p.e.fleetMatchesAt(ctx, v.Revision)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.done++
	if wrong != "" && ctx.Err() == nil {
		p.early = append(p.early, fmt.Sprintf("Done at revision %d while %s", v.Revision, wrong))
	}
}

// killAndChange is the scenario of finding 10: with the fleet done, the
// replica victim is killed (SIGKILL: its summary stays until its lease
// expires) and every desired group changes in one transaction, while
// watcher's view is polled every 50 ms. No Done answer may come while
// the fleet differs from the desired groups; the view is Done again once
// the survivors have applied everything.
func killAndChange(t *testing.T, e *e2e, victim, watcher string, survivors int) {
	p := &viewPoller{e: e, replica: watcher}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		p.run(ctx)
	}()
	defer func() { cancel(); wg.Wait() }()

	e.procs[victim].Kill()
	ops := make([]clientv3.Op, 20)
	for i := range ops {
		ops[i] = clientv3.OpPut(fmt.Sprintf("/fleet/desired/web-%d", i), fmt.Sprintf(`{"size":%d,"image":"web:2"}`, i+1))
	}
	tctx, tcancel := context.WithTimeout(context.Background(), within)
	defer tcancel()
	if _, err := e.cli.Txn(tctx).Then(ops...).Commit(); err != nil {
		t.Fatal(err)
	}
	changed := time.Now()
	e.waitDone(watcher, survivors, 20)
	took := time.Since(changed)
	// Polled on past the first right answer: a Done must stay right.
	time.Sleep(500 * time.Millisecond)
	cancel()
	wg.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	t.Logf("view polled %d times; %d Done answers; done again %v after the change; early Done answers: %d", p.polls, p.done, took, len(p.early))
	if len(p.early) > 0 {
		t.Fatalf("%d early Done answers from the view, first: %s", len(p.early), p.early[0])
	}
	if p.done == 0 {
		t.Fatal("the view never said Done after the change")
	}
}

// Finding 10, sharded, and row "view during kill-and-change" of the fault
// table.
func TestE2EViewNeverDoneEarlyShards(t *testing.T) {
	e := startE2E(t)
	e.waitDone("r1", 3, 20)
	killAndChange(t, e, "r3", "r1", 2)
}

// Finding 10, leader-only: the leader is killed.
func TestE2EViewNeverDoneEarlyLeaderOnly(t *testing.T) {
	e := startE2E(t, "-leader-only")
	e.waitDone("r1", 1, 20)
	v, err := shard.ReadView(context.Background(), e.cli, "/fleet/leader-view", "/fleet/desired/")
	if err != nil || len(v.Replicas) != 1 {
		t.Fatalf("leader view: %+v, %v", v, err)
	}
	victim := v.Replicas[0].Name
	watcher := "r1"
	if victim == watcher {
		watcher = "r2"
	}
	killAndChange(t, e, victim, watcher, 1)
}

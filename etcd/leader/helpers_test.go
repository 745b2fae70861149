package leader

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// within bounds every wait of these tests: long enough never to fire on a
// loaded CI machine, and it only bounds a wait, it never paces one.
const within = 20 * time.Second

// startElector runs an elector until the test ends or stop is called; stop
// waits for Run to return.
func startElector(t *testing.T, cli *clientv3.Client, name string, ttl time.Duration, tune ...func(*Config)) (e *Elector, stop func()) {
	t.Helper()
	cfg := Config{Client: cli, Prefix: "/test/leader", Name: name, TTL: ttl, RetryInterval: 100 * time.Millisecond}
	for _, f := range tune {
		f(&cfg)
	}
	e, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := e.Run(ctx); err != nil {
			t.Errorf("%s: Run: %v", name, err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return e, stop
}

// waitLeading waits until e.Leading() == want, on e's Changed channel.
func waitLeading(t *testing.T, e *Elector, want bool) {
	t.Helper()
	deadline := time.After(within)
	for {
		ch := e.Changed()
		if e.Leading() == want {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: Leading() did not become %v within %v", e.cfg.Name, want, within)
		}
	}
}

// waitFor waits until cond holds, re-evaluating it on e's Changed.
func waitFor(t *testing.T, e *Elector, cond func() bool) {
	t.Helper()
	deadline := time.After(within)
	for {
		ch := e.Changed()
		if cond() {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("%s: condition not met within %v", e.cfg.Name, within)
		}
	}
}

// waitOneLeader waits until exactly one of es leads and returns it.
func waitOneLeader(t *testing.T, es ...*Elector) *Elector {
	t.Helper()
	deadline := time.After(within)
	for {
		chans := make([]<-chan struct{}, len(es))
		var leaders []*Elector
		for i, e := range es {
			chans[i] = e.Changed()
			if e.Leading() {
				leaders = append(leaders, e)
			}
		}
		if len(leaders) > 1 {
			t.Fatalf("%d leaders at once", len(leaders))
		}
		if len(leaders) == 1 {
			return leaders[0]
		}
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)}}
		for _, ch := range chans {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			t.Fatalf("no leader within %v", within)
		}
	}
}

// recorder is a Governed that records what it was told.
type recorder struct {
	mu      sync.Mutex
	running bool
	calls   []string
}

func (r *recorder) Suspend() { r.set(false, "suspend") }
func (r *recorder) Resume()  { r.set(true, "resume") }

func (r *recorder) set(running bool, call string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.running = running
	r.calls = append(r.calls, call)
}

func (r *recorder) isRunning() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.running
}

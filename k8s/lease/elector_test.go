package lease_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/k8s/lease"
)

// Short durations, so that a test takes seconds: a replica is replaced
// within about leaseDuration + retryPeriod.
const (
	leaseDuration = 2 * time.Second
	renewDeadline = time.Second
	retryPeriod   = 100 * time.Millisecond
	waitLimit     = time.Minute
)

var leaseSeq atomic.Int64

// replica is one elector, running.
type replica struct {
	e    *lease.Elector
	stop context.CancelFunc
	done chan struct{}
}

// newLeaseName installs the Lease API and returns a Lease name no other
// test uses.
func newLeaseName(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if err := srv.InstallLeases(ctx); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("lease-%d", leaseSeq.Add(1))
}

// start runs an elector of Lease name as identity, through cfg.
func start(t *testing.T, cfg *rest.Config, name, identity string) *replica {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e, err := lease.New(lease.Config{
		Client: cs.CoordinationV1(), Namespace: "lease-test", Name: name, Identity: identity,
		LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod,
	}, hivetest.Logger(t, hivetest.LogLevel(slog.LevelError)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{e: e, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := e.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(r.halt)
	return r
}

// halt stops the replica and waits for Run to return.
func (r *replica) halt() {
	r.stop()
	<-r.done
}

// waitLeading waits, on Changed, until the replica leads (or not).
func (r *replica) waitLeading(t *testing.T, leading bool) time.Time {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		ch := r.e.Changed()
		if r.e.Leading() == leading {
			return time.Now()
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("leading never became %v", leading)
		}
	}
}

// A leader that dies (its connection gone, nothing given up) is
// replaced within the lease duration plus a second, under a higher
// fencing token.
func TestFailover(t *testing.T) {
	name := newLeaseName(t)
	link := srv.NewLink()
	a := start(t, link.Config(), name, "a")
	a.waitLeading(t, true)
	tokA, _ := a.e.Token()
	b := start(t, srv.Config(), name, "b")

	link.Blackhole() // the leader's node is gone: nothing reaches the server
	killed := time.Now()
	a.stop()
	b.waitLeading(t, true)
	if took := time.Since(killed); took > leaseDuration+time.Second {
		t.Fatalf("the standby took over after %s, want at most %s", took, leaseDuration+time.Second)
	}
	tokB, _ := b.e.Token()
	if !tokA.Less(tokB) || tokB.Holder != "b" {
		t.Fatalf("tokens %s then %s", tokA, tokB)
	}
	link.Restore()
	<-a.done
}

// A leader cut off from the API server while it runs stops acting
// (Owns false, its operations cancelled with ErrRenewDeadline) before
// the standby starts; once back, it does not lead again while the
// standby holds the Lease.
func TestStaleLeaderStopsFirst(t *testing.T) {
	name := newLeaseName(t)
	link := srv.NewLink()
	a := start(t, link.Config(), name, "a")
	a.waitLeading(t, true)
	b := start(t, srv.Config(), name, "b")
	opCtx, release, ok := a.e.Acquire(context.Background(), []byte("k"))
	if !ok {
		t.Fatal("the leader acquired nothing")
	}
	defer release()
	if tok, ok := lease.TokenFrom(opCtx); !ok || tok.Holder != "a" {
		t.Fatalf("operation token %v, %v", tok, ok)
	}

	link.Blackhole()
	b.waitLeading(t, true)
	select {
	case <-opCtx.Done():
	default:
		t.Fatal("the old leader's operation still runs while the new leader leads")
	}
	if cause := context.Cause(opCtx); !errors.Is(cause, lease.ErrRenewDeadline) {
		t.Fatalf("cause %v", cause)
	}
	if a.e.Owns(nil) {
		t.Fatal("the old leader still owns")
	}
	termsA, termsB := a.e.Terms(), b.e.Terms()
	if len(termsA) < 2 || len(termsB) < 1 || !termsA[1].Before(termsB[0]) {
		t.Fatalf("the old leader's term ended at %v, the new one's started at %v", termsA, termsB)
	}
	if _, _, ok := a.e.Acquire(context.Background(), nil); ok {
		t.Fatal("the old leader acquired after its deadline")
	}

	link.Restore()
	// Back in contact, it sees b's Lease, valid, and waits: its campaign
	// tries every retryPeriod, and b renews as often. Five renewals of
	// b's after the partition are five chances for a to misbehave.
	watchRenewals(t, name, 5)
	if a.e.Leading() || !b.e.Leading() {
		t.Fatalf("after the partition: a leads %v, b leads %v", a.e.Leading(), b.e.Leading())
	}
}

// watchRenewals waits until the Lease name has been written n times.
func watchRenewals(t *testing.T, name string, n int) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	w, err := cs.CoordinationV1().Leases("lease-test").Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Modified {
			if n--; n == 0 {
				return
			}
		}
	}
	t.Fatalf("the Lease was not renewed %d more times", n)
}

// A clean stop lets the operation in flight end first, then gives the
// Lease up: the standby leads long before the lease duration, and after
// the operation ended.
func TestCleanStopHandsOver(t *testing.T) {
	name := newLeaseName(t)
	a := start(t, srv.Config(), name, "a")
	a.waitLeading(t, true)
	b := start(t, srv.Config(), name, "b")
	opCtx, release, ok := a.e.Acquire(context.Background(), nil)
	if !ok {
		t.Fatal("the leader acquired nothing")
	}
	stopped := time.Now()
	go a.stop()
	// Stopping, it acquires nothing more, but lets the operation run.
	a.waitLeading(t, false)
	if opCtx.Err() != nil {
		t.Fatal("the operation in flight was cancelled at once")
	}
	if b.e.Leading() {
		t.Fatal("the standby leads while the old leader's operation runs")
	}
	released := time.Now()
	release()
	led := b.waitLeading(t, true)
	if !led.After(released) || led.Sub(stopped) > leaseDuration {
		t.Fatalf("stopped at %v, released at %v, the standby led at %v", stopped, released, led)
	}
	<-a.done
}

// Bad configurations fail New, naming the field.
func TestConfigValidation(t *testing.T) {
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	good := lease.Config{Client: cs.CoordinationV1(), Namespace: "ns", Name: "n", Identity: "i"}
	for _, tc := range []struct {
		field string
		edit  func(*lease.Config)
	}{
		{"Client", func(c *lease.Config) { c.Client = nil }},
		{"Namespace", func(c *lease.Config) { c.Namespace = "" }},
		{"Identity", func(c *lease.Config) { c.Identity = "" }},
		{"LeaseDuration", func(c *lease.Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = time.Second, 2*time.Second, 100*time.Millisecond
		}},
		{"RenewDeadline", func(c *lease.Config) { c.RenewDeadline, c.RetryPeriod = time.Second, time.Second }},
	} {
		c := good
		tc.edit(&c)
		if _, err := lease.New(c, nil); !errors.Is(err, lease.ErrInvalidConfig) || !contains(err.Error(), tc.field) {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
	if _, err := lease.New(good, nil); err != nil {
		t.Fatal(err)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

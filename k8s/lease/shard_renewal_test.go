package lease_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/converge-go/converge/k8s/lease"
)

// slowMember answers the writes of membership Leases (names with "-m-",
// and every create) after they were applied, late by delay, ignoring the request's
// context, and sends each such success on returned.
type slowMember struct {
	next     http.RoundTripper
	delay    time.Duration
	returned chan struct{}
}

func (s slowMember) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.next.RoundTrip(req)
	member := strings.Contains(req.URL.Path, "-m-") || req.Method == http.MethodPost // a create names no Lease in its path
	if req.Method == http.MethodGet || !member {
		return resp, err
	}
	time.Sleep(s.delay) // a slow answer: the server applied the write
	if err == nil && resp.StatusCode < 300 {
		select {
		case s.returned <- struct{}{}:
		default:
		}
	}
	return resp, err
}

// A renewal of the membership that comes back later than LeaseDuration -
// RenewDeadline does not count, though it succeeded: the others may have
// read the old Lease and found the member expired before it landed. A
// replica whose renewals are all that slow owns nothing, ever.
func TestShardSlowRenewalDoesNotCount(t *testing.T) {
	group := newLeaseName(t)
	// A renewal back between LeaseDuration - RenewDeadline (1 s) and
	// RenewDeadline (2 s) would extend the membership if it counted.
	durations := func(c *lease.ShardConfig) { c.LeaseDuration, c.RenewDeadline = 3*time.Second, 2*time.Second }
	slow := slowMember{delay: 1300 * time.Millisecond, returned: make(chan struct{}, 1)}
	// The slots' Leases exist, free, so that claiming them is an update,
	// which is not slowed: only the membership is.
	b := startMember(t, srv.Config(), group, "b")
	waitOwners(t, []*member{b}, assigned([]string{"b"}))
	b.halt()
	cfg := srv.Config()
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { slow.next = rt; return slow })
	a := startMember(t, cfg, group, "a", durations)
	for range 3 {
		select {
		case <-slow.returned:
		case <-time.After(waitLimit):
			t.Fatal("no slow renewal came back")
		}
		if owned := a.s.Owned(); len(owned) != 0 {
			t.Fatalf("a replica whose renewals come back late owns %v", owned)
		}
	}
	a.halt()
	if spans := a.s.Spans(); len(spans) != 0 {
		t.Fatalf("a replica whose renewals come back late owned %+v", spans)
	}
}

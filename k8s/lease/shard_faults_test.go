package lease_test

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// The faults a replica's client can be given.
const (
	faultNone     = iota
	faultRenewals // its membership's writes fail; it reads and writes slots
	faultWrites   // every write fails; it reads
	faultAll      // every request fails
)

// faultyClient fails the requests of one replica as its mode says.
type faultyClient struct {
	next http.RoundTripper
	id   string
	mode atomic.Int32
}

var errInjected = errors.New("injected fault")

func (f *faultyClient) RoundTrip(req *http.Request) (*http.Response, error) {
	write := req.Method != http.MethodGet
	switch f.mode.Load() {
	case faultAll:
		return nil, errInjected
	case faultWrites:
		if write {
			return nil, errInjected
		}
	case faultRenewals:
		if write && (strings.HasSuffix(req.URL.Path, "-m-"+f.id) || req.Method == http.MethodPost) {
			return nil, errInjected
		}
	}
	return f.next.RoundTrip(req)
}

// Faults from outside, one replica at a time: its membership renewals
// failing while it can still read and write slots, all its writes
// failing, or every request failing. Each time the other two own all of
// its slots within the lease duration plus 2 s, the replica owns them
// again once the fault ends, and no slot is ever owned by two replicas
// at once.
func TestShardFaults(t *testing.T) {
	group := newLeaseName(t)
	ids := []string{"a", "b", "c"}
	var ms []*member
	clients := map[string]*faultyClient{}
	for _, id := range ids {
		fc := &faultyClient{id: id}
		cfg := srv.Config()
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { fc.next = rt; return fc })
		clients[id] = fc
		ms = append(ms, startMember(t, cfg, group, id))
	}
	waitOwners(t, ms, assigned(ids))
	rounds := []struct {
		victim string
		fault  int32
	}{{"c", faultRenewals}, {"a", faultWrites}, {"b", faultAll}, {"a", faultRenewals}}
	for _, r := range rounds {
		var others []string
		var rest []*member
		for i, id := range ids {
			if id != r.victim {
				others, rest = append(others, id), append(rest, ms[i])
			}
		}
		clients[r.victim].mode.Store(r.fault)
		cut := time.Now()
		waitOwners(t, rest, assigned(others))
		took := time.Since(cut)
		t.Logf("fault %d on %s: its slots owned by the others after %s", r.fault, r.victim, took)
		if took > leaseDuration+2*time.Second {
			t.Errorf("fault %d on %s: its slots owned by the others after %s, want within %s", r.fault, r.victim, took, leaseDuration+2*time.Second)
		}
		clients[r.victim].mode.Store(faultNone)
		waitOwners(t, ms, assigned(ids))
	}
	checkNoOverlap(t, ms)
}

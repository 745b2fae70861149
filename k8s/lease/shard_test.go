package lease_test

import (
	"context"
	"errors"
	"log/slog"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/converge-go/converge/internal/slots"
	"github.com/converge-go/converge/k8s/lease"
)

// testSlots keeps the tests' groups small.
const testSlots = 16

// member is one sharder, running.
type member struct {
	id   string
	s    *lease.Sharder
	stop context.CancelFunc
	done chan struct{}
}

// startMember runs a sharder of group as id, through cfg, with the tests'
// durations changed by opts.
func startMember(t testing.TB, cfg *rest.Config, group, id string, opts ...func(*lease.ShardConfig)) *member {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sc := lease.ShardConfig{
		Client: cs.CoordinationV1(), Namespace: "lease-test", Name: group, Identity: id,
		Slots: testSlots, LeaseDuration: leaseDuration, RenewDeadline: renewDeadline,
		RetryPeriod: retryPeriod, DrainTimeout: time.Second,
	}
	for _, o := range opts {
		o(&sc)
	}
	s, err := lease.NewSharder(sc, hivetest.Logger(t, hivetest.LogLevel(slog.LevelError)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &member{id: id, s: s, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if err := s.Run(ctx); err != nil {
			t.Error(err)
		}
	}()
	t.Cleanup(m.halt)
	return m
}

// halt stops the member cleanly and waits for Run to return.
func (m *member) halt() {
	m.stop()
	<-m.done
}

// waitOwners waits, on the members' Changed, until cond holds of what
// each member owns (by member), and returns when it first did.
func waitOwners(t testing.TB, ms []*member, cond func(owned map[string][]int) bool) time.Time {
	t.Helper()
	deadline := time.After(waitLimit)
	for {
		chs := make([]<-chan struct{}, len(ms))
		owned := map[string][]int{}
		for i, m := range ms {
			chs[i] = m.s.Changed()
			owned[m.id] = m.s.Owned()
		}
		if cond(owned) {
			return time.Now()
		}
		cases := make([]reflect.SelectCase, 0, len(chs)+1)
		for _, ch := range chs {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ch)})
		}
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline)})
		if i, _, _ := reflect.Select(cases); i == len(chs) {
			t.Fatalf("ownership never settled; last %v", owned)
		}
	}
}

// assigned reports whether every slot is owned by exactly the member the
// rendezvous assignment over ids gives it to.
func assigned(ids []string) func(map[string][]int) bool { return assignedOf(testSlots, ids) }

// assignedOf is assigned for a group of n slots.
func assignedOf(n int, ids []string) func(map[string][]int) bool {
	return func(owned map[string][]int) bool {
		for s := range n {
			want := slots.Assign(s, ids)
			for id, os := range owned {
				if slices.Contains(os, s) != (id == want) {
					return false
				}
			}
		}
		return true
	}
}

// checkNoOverlap fails the test if two members owned one slot at once,
// as their Owns answered (each span widened to cover its Owns' answers).
func checkNoOverlap(t *testing.T, ms []*member) {
	t.Helper()
	type owned struct {
		id string
		lease.OwnedSpan
	}
	bySlot := map[int][]owned{}
	for _, m := range ms {
		for _, sp := range m.s.Spans() {
			bySlot[sp.Slot] = append(bySlot[sp.Slot], owned{m.id, sp})
		}
	}
	far := time.Now().Add(time.Hour)
	end := func(sp lease.OwnedSpan) time.Time {
		if sp.End.IsZero() {
			return far
		}
		return sp.End
	}
	for s, spans := range bySlot {
		for i, a := range spans {
			for _, b := range spans[i+1:] {
				if a.id != b.id && a.Start.Before(end(b.OwnedSpan)) && b.Start.Before(end(a.OwnedSpan)) {
					t.Errorf("slot %d owned by %s %v-%v and by %s %v-%v at once", s, a.id, a.Start, a.End, b.id, b.Start, b.End)
				}
			}
		}
	}
}

// Three replicas split the slots as the rendezvous assignment over them
// says, each slot owned by one; a replica stopped cleanly releases its
// slots, which the others own within a few looks at the group, well
// before its Lease could have expired.
func TestShardSplitsAndHandsOver(t *testing.T) {
	group := newLeaseName(t)
	a := startMember(t, srv.Config(), group, "a")
	waitOwners(t, []*member{a}, assigned([]string{"a"}))
	b := startMember(t, srv.Config(), group, "b")
	c := startMember(t, srv.Config(), group, "c")
	all := []*member{a, b, c}
	waitOwners(t, all, assigned([]string{"a", "b", "c"}))
	for _, m := range all {
		if n := len(m.s.Owned()); n == 0 || n == testSlots {
			t.Errorf("%s owns %d of %d slots", m.id, n, testSlots)
		}
		if got := m.s.Members(); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Errorf("%s sees members %v", m.id, got)
		}
	}

	stopped := time.Now()
	c.halt()
	waitOwners(t, []*member{a, b}, assigned([]string{"a", "b"}))
	took := time.Since(stopped)
	t.Logf("a stopped replica's slots owned again after %s", took)
	if took >= leaseDuration {
		t.Errorf("the slots of a replica stopped cleanly were owned again after %s, not before its lease could expire (%s)", took, leaseDuration)
	}
	if len(c.s.Owned()) != 0 {
		t.Errorf("a stopped replica owns %v", c.s.Owned())
	}
	checkNoOverlap(t, all)
}

// A replica cut off from the API server (every request of its own
// unanswered) stops owning before any other replica owns one of its
// slots, and the others own every one of them within the lease duration
// plus 2 s, each under a higher fencing token; no slot is owned by two
// replicas at once, and when the link comes back the replica rejoins and
// is given its slots back.
func TestShardCutOffReplicaIsReplaced(t *testing.T) {
	group := newLeaseName(t)
	link := srv.NewLink()
	a := startMember(t, srv.Config(), group, "a")
	b := startMember(t, srv.Config(), group, "b")
	c := startMember(t, link.Config(), group, "c")
	all := []*member{a, b, c}
	waitOwners(t, all, assigned([]string{"a", "b", "c"}))
	cSlots := c.s.Owned()
	tokens := map[int]lease.Token{}
	for _, s := range cSlots {
		tokens[s], _ = c.s.Token(s)
	}

	link.Blackhole()
	cut := time.Now()
	waitOwners(t, []*member{a, b}, assigned([]string{"a", "b"}))
	took := time.Since(cut)
	t.Logf("the cut-off replica's %d slots owned again after %s", len(cSlots), took)
	if took > leaseDuration+2*time.Second {
		t.Errorf("the cut-off replica's slots were owned again after %s, want within %s", took, leaseDuration+2*time.Second)
	}
	if len(c.s.Owned()) != 0 {
		t.Errorf("the cut-off replica still owns %v", c.s.Owned())
	}
	for _, s := range cSlots {
		for _, m := range []*member{a, b} {
			if tok, ok := m.s.Token(s); ok && !tokens[s].Less(tok) {
				t.Errorf("slot %d: new token %v not above the cut-off replica's %v", s, tok, tokens[s])
			}
		}
	}
	checkNoOverlap(t, all)

	link.Restore()
	waitOwners(t, all, assigned([]string{"a", "b", "c"}))
	checkNoOverlap(t, all)
}

// Bad configurations fail NewSharder, naming the field.
func TestShardConfigValidation(t *testing.T) {
	cs, err := kubernetes.NewForConfig(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	good := lease.ShardConfig{Client: cs.CoordinationV1(), Namespace: "ns", Name: "n", Identity: "i"}
	for _, tc := range []struct {
		field string
		edit  func(*lease.ShardConfig)
	}{
		{"ShardConfig.Client", func(c *lease.ShardConfig) { c.Client = nil }},
		{"ShardConfig.Namespace", func(c *lease.ShardConfig) { c.Namespace = "" }},
		{"ShardConfig.Name", func(c *lease.ShardConfig) { c.Name = "not a label value" }},
		{"ShardConfig.Identity", func(c *lease.ShardConfig) { c.Identity = "" }},
		{"ShardConfig.Slots", func(c *lease.ShardConfig) { c.Slots = lease.MaxSlots + 1 }},
		{"ShardConfig.LeaseDuration", func(c *lease.ShardConfig) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = time.Second, 2*time.Second, 100*time.Millisecond
		}},
		{"ShardConfig.RenewDeadline", func(c *lease.ShardConfig) { c.RenewDeadline, c.RetryPeriod = time.Second, time.Second }},
		{"ShardConfig.DrainTimeout", func(c *lease.ShardConfig) { c.DrainTimeout = -time.Second }},
	} {
		c := good
		tc.edit(&c)
		if _, err := lease.NewSharder(c, nil); !errors.Is(err, lease.ErrInvalidConfig) || !contains(err.Error(), tc.field) {
			t.Errorf("%s: %v", tc.field, err)
		}
	}
	if _, err := lease.NewSharder(good, nil); err != nil {
		t.Fatal(err)
	}
}

// A replica that died without releasing anything (its link dead, then
// stopped) and is restarted with the same Identity claims its slots at
// once, before its old membership could expire, under higher tokens.
func TestShardRestartedReplicaReclaimsAtOnce(t *testing.T) {
	group := newLeaseName(t)
	link := srv.NewLink()
	old := startMember(t, link.Config(), group, "a")
	waitOwners(t, []*member{old}, assigned([]string{"a"}))
	tok, _ := old.s.Token(0)
	link.Blackhole()
	old.halt() // nothing it sends reaches the server: its Leases still name it

	restarted := time.Now()
	a := startMember(t, srv.Config(), group, "a")
	waitOwners(t, []*member{a}, assigned([]string{"a"}))
	took := time.Since(restarted)
	t.Logf("a restarted replica owned its slots after %s", took)
	if took >= leaseDuration {
		t.Errorf("a restarted replica owned its slots after %s, not before its old membership could expire (%s)", took, leaseDuration)
	}
	if now, _ := a.s.Token(0); !tok.Less(now) {
		t.Errorf("slot 0's token after the restart %v, not above %v", now, tok)
	}
}

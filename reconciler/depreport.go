package reconciler

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/converge-go/converge/reconciler/internal/clock"
	"github.com/converge-go/converge/reconciler/internal/health"
)

// What the dependency graph adds to the reports and to Explain: the
// Blocked rows hold the waits' watermarks back (a Blocked change is not
// attempted, nor settled), they are counted (Status, the gauges), a key
// Blocked longer than blockedHealthAfter makes health Degraded, and
// Explain says what a Blocked row waits for.

// blockedHealthAfter is how long a key may stay Blocked before health
// says so: a dependency that takes that long is missing or failing.
const blockedHealthAfter = time.Minute

// oldestBlocked returns the row Blocked longest, and since when (nil:
// none). Stale entries at the head of the list are dropped as met.
func (g *depGraph[Obj]) oldestBlocked() (*request[Obj], time.Time) {
	for len(g.blockedAt) > 0 {
		if w := g.blockedAt[0]; w.valid() {
			return w.r, w.since
		}
		g.blockedAt[0] = depWaiter[Obj]{}
		g.blockedAt = g.blockedAt[1:]
	}
	g.blockedAt = nil // let the array go
	return nil, time.Time{}
}

// blockedHealth adds to whole what health says of keys Blocked longer
// than blockedHealthAfter (a whole-target error goes first), and arms
// later for when the oldest Blocked key will be. It marks h dirty when
// what it says changes.
func (t *requests[Obj]) blockedHealth(whole *health.Whole, h *health.State, later *clock.Timer, now time.Time) {
	msg := ""
	if r, since := t.deps.oldestBlocked(); r != nil {
		if at := since.Add(blockedHealthAfter); at.After(now) {
			later.ArmAt(at)
		} else {
			msg = fmt.Sprintf("%d key(s) blocked on dependencies, one for over %s", t.n[stBlocked], blockedHealthAfter)
			if whole.Err == nil {
				*whole = health.Whole{Op: "dependencies", What: msg,
					Err: fmt.Errorf("the oldest, %s: %s", printableKey(r.key), t.blockedWhy(r.key))}
			}
		}
	}
	if msg != t.deps.lastHealth {
		t.deps.lastHealth, h.Dirty = msg, true
	}
}

// blockedWhy says what the Blocked row of key waits for.
func (t *requests[Obj]) blockedWhy(key string) string {
	r := t.rows[key]
	if r == nil || r.state != stBlocked {
		return ""
	}
	if r.deleted {
		users := t.usersOf(key, 3)
		return fmt.Sprintf("its Delete waits for %d object(s) that depend on it to be deleted from the target: %s",
			t.deps.users[key], strings.Join(users, ", "))
	}
	if d, why, ok := t.firstUnmet(r); ok {
		return fmt.Sprintf("blocked on %s: %s", printableKey(d), why)
	}
	if nk, why, ok := t.deps.needUnmet(r); ok {
		return fmt.Sprintf("blocked on %s: %s", t.deps.describeNeed(nk), why)
	}
	if t.deps.isCyclic(key) {
		return "on a dependency cycle: its Error is being written"
	}
	return "its dependencies are Done: it is released at the next step"
}

// usersOf returns up to n keys whose applied objects name key, sorted:
// what keeps key's Delete waiting. It walks the applied graph: Explain's
// cost, not the loop's.
func (t *requests[Obj]) usersOf(key string, n int) []string {
	var users []string
	for k, d := range t.deps.named {
		if d == key {
			users = append(users, k)
		}
	}
	for k, deps := range t.deps.namedAll {
		if slices.Contains(deps, key) {
			users = append(users, k)
		}
	}
	slices.Sort(users)
	out := make([]string, 0, min(len(users), n)+1)
	for i, k := range users {
		if i == n {
			out = append(out, fmt.Sprintf("and %d more", len(users)-n))
			break
		}
		out = append(out, printableKey(k))
	}
	return out
}

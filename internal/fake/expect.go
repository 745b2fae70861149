package fake

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Mark returns the position after the operations that have ended so far.
// Give it to Expect to look only at the operations that end after it.
func (t *Target) Mark() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.history)
}

// Match says how Expect compares the operations that ended with the ones
// it wants.
type Match struct {
	// AnyOrder lets operations on different keys end in any order; the
	// operations on one key must still end in the order wanted. Use it
	// only where the reconciler defines no order across keys: operations
	// that run at once (Concurrency above 1, a retry beside new work) or
	// that one round hands over together.
	AnyOrder bool

	// Skip, if set, passes over operations that it matches in full and
	// that end before the wanted ones: the retries of a fault that was
	// healed while they ran, whose number the test cannot know.
	Skip *regexp.Regexp
}

// Expect waits until len(want) operations (after the skipped ones) have
// ended after position from, and checks that they are want, as m says.
// It returns the position after them: pass it to the next Expect, so that
// every operation is looked at once. Operations that end later are left
// for the next Expect.
//
// It fails as soon as the operations that ended are not want (history
// only grows, so waiting cannot make them match), or when ctx ends first.
// Errors list the operations since from.
func (t *Target) Expect(ctx context.Context, from int, want []string, m Match) (next int, err error) {
	for {
		t.mu.Lock()
		if from > len(t.history) {
			t.mu.Unlock()
			return from, fmt.Errorf("mark %d is past the %d operations so far (history cleared?)", from, len(t.history))
		}
		since := slices.Clone(t.history[from:])
		changed := t.changed
		t.mu.Unlock()

		skipped := 0
		for m.Skip != nil && skipped < len(since) && fullMatch(m.Skip, since[skipped]) {
			skipped++
		}
		if got := since[skipped:]; len(got) >= len(want) {
			got = got[:len(want)]
			if !matches(got, want, m.AnyOrder) {
				return from, fmt.Errorf("operations: want %s%s, got %s (all since the mark: %s)",
					strings.Join(want, " "), orderNote(m.AnyOrder), strings.Join(got, " "), strings.Join(since, " "))
			}
			return from + skipped + len(want), nil
		}
		select {
		case <-ctx.Done():
			return from, fmt.Errorf("operations: want %s%s, got only %s: %w",
				strings.Join(want, " "), orderNote(m.AnyOrder), strings.Join(since[skipped:], " "), ctx.Err())
		case <-changed:
		}
	}
}

// fullMatch reports whether re matches all of s.
func fullMatch(re *regexp.Regexp, s string) bool {
	loc := re.FindStringIndex(s)
	return loc != nil && loc[0] == 0 && loc[1] == len(s)
}

func orderNote(anyOrder bool) string {
	if anyOrder {
		return " (any order across keys)"
	}
	return ""
}

// matches reports whether got is want: in order, or with anyOrder in any
// order across keys but in order for each key.
func matches(got, want []string, anyOrder bool) bool {
	if !anyOrder {
		return slices.Equal(got, want)
	}
	perKey := func(ops []string) map[string][]string {
		m := map[string][]string{}
		for _, op := range ops {
			k := OpKey(op)
			m[k] = append(m[k], op)
		}
		return m
	}
	g, w := perKey(got), perKey(want)
	if len(g) != len(w) {
		return false
	}
	for k, ops := range w {
		if !slices.Equal(g[k], ops) {
			return false
		}
	}
	return true
}

// OpKey returns the key of a history entry: "1" for "update(1) fail" or
// "update-refresh(1)", and the operation's name for those that cover
// every key ("prune" for "prune(n=2)", "sync" for "sync(n=3) fail").
func OpKey(entry string) string {
	name, rest, ok := strings.Cut(entry, "(")
	if !ok {
		return entry
	}
	key, _, _ := strings.Cut(rest, ")")
	if strings.HasPrefix(key, "n=") {
		return name
	}
	return key
}

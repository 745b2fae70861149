package slots

import (
	"fmt"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The slot of a key and the owner of a slot must never change between
// releases: replicas of different versions, and the etcd and Kubernetes
// sharding alike, must agree during a rolling upgrade.
func TestPinned(t *testing.T) {
	want := map[string]int{"": 155, "a": 248, "web": 243, "db-0001": 148, "fleet/eu-west/group-17": 161}
	for k, w := range want {
		if got := Of([]byte(k), 256); got != w {
			t.Errorf("Of(%q, 256) = %d, pinned %d", k, got, w)
		}
	}
	members := []string{"replica-0", "replica-1", "replica-2"}
	got := ""
	for s := range 8 {
		got += Assign(s, members)[len("replica-"):]
	}
	if got != pinnedAssign {
		t.Errorf("Assign of slots 0-7 over 3 members = %s, pinned %s", got, pinnedAssign)
	}
	if Assign(0, nil) != "" {
		t.Error("Assign over no members is not empty")
	}
}

// A member leaving moves only its own slots.
func TestAssignLeaveMovesOnlyItsSlots(t *testing.T) {
	all := []string{"a", "b", "c", "d"}
	left := []string{"a", "b", "d"}
	for s := range 512 {
		before, after := Assign(s, all), Assign(s, left)
		if before != "c" && before != after {
			t.Fatalf("slot %d moved %s -> %s though c left", s, before, after)
		}
	}
}

func TestOfSpreadsKeys(t *testing.T) {
	const n, keys = 64, 64000
	counts := make([]int, n)
	for i := range keys {
		counts[Of(fmt.Appendf(nil, "group-%d", i), n)]++
	}
	for s, c := range counts {
		// 1000 expected per slot; 6 standard deviations is about ±190.
		if c < 800 || c > 1200 {
			t.Errorf("slot %d got %d keys of %d", s, c, keys)
		}
	}
}

// pinnedAssign is the owners of slots 0-7 over replica-0..2, by suffix.
const pinnedAssign = "02212120"

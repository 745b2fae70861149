package shard

import (
	"fmt"
	"testing"
)

// The slot of a key must never change between releases: replicas of
// different versions must agree during a rolling upgrade.
func TestSlotOfIsStable(t *testing.T) {
	// Pinned: changing the hash moves keys between slots across a rolling
	// upgrade, so it must be a deliberate, breaking change.
	want := map[string]int{"": 155, "a": 248, "web": 243, "db-0001": 148, "fleet/eu-west/group-17": 161}
	for k, w := range want {
		if got := SlotOf([]byte(k), 256); got != w {
			t.Errorf("SlotOf(%q, 256) = %d, pinned %d", k, got, w)
		}
	}
}

func TestSlotOfSpreadsKeys(t *testing.T) {
	const slots, keys = 64, 64000
	counts := make([]int, slots)
	for i := range keys {
		counts[SlotOf(fmt.Appendf(nil, "group-%d", i), slots)]++
	}
	for s, n := range counts {
		// 1000 expected per slot; 6 standard deviations is about ±190.
		if n < 800 || n > 1200 {
			t.Errorf("slot %d got %d keys of %d, want about %d", s, n, keys, keys/slots)
		}
	}
}

func members(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("replica-%d", i)
	}
	return out
}

// A member joining takes about 1/N of the slots, each from someone else,
// and no slot moves between the members that stayed.
func TestAssignJoinMovesOnlyToNewMember(t *testing.T) {
	const slots = 1024
	for n := 1; n <= 8; n++ {
		before, after := members(n), members(n+1)
		newcomer := after[n]
		moved := 0
		for s := range slots {
			b, a := Assign(s, before), Assign(s, after)
			if b != a {
				moved++
				if a != newcomer {
					t.Fatalf("n=%d: slot %d moved %s -> %s, not to the newcomer", n, s, b, a)
				}
			}
		}
		want := slots / (n + 1)
		if moved < want*2/3 || moved > want*4/3 {
			t.Errorf("n=%d -> %d: %d slots moved, want about %d", n, n+1, moved, want)
		}
	}
}

// A member leaving gives up only its own slots.
func TestAssignLeaveMovesOnlyTheLeaversSlots(t *testing.T) {
	const slots = 1024
	all := members(5)
	leaver := all[2]
	rest := append(append([]string{}, all[:2]...), all[3:]...)
	for s := range slots {
		b, a := Assign(s, all), Assign(s, rest)
		if b != a && b != leaver {
			t.Fatalf("slot %d of %s moved to %s when %s left", s, b, a, leaver)
		}
		if a == leaver {
			t.Fatalf("slot %d assigned to the member that left", s)
		}
	}
	if Assign(0, nil) != "" {
		t.Fatal("Assign with no members must return \"\"")
	}
}

package shard

import "github.com/converge-go/converge/internal/slots"

// SlotOf returns the slot of the object with primary key key among n
// slots. It is a pure function of its arguments (FNV-1a, 64 bits, mixed),
// the same in every process and release, which is what lets replicas agree
// on who owns a key without talking. The k8s module's lease.Sharder maps
// keys the same way.
func SlotOf(key []byte, n int) int { return slots.Of(key, n) }

// Assign returns the member that owns slot among members by rendezvous
// (highest random weight) hashing: every member scores every slot, and the
// highest score wins. When a member joins it wins about 1/N of the slots,
// each from whoever held it; when one leaves only its slots move. It
// returns "" when members is empty.
func Assign(slot int, members []string) string { return slots.Assign(slot, members) }

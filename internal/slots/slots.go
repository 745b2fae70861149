// Package slots maps keys to slots and slots to members, the same way in
// every process and release: the pure half of sharding, shared by the
// etcd module's shard.Manager and the k8s module's lease.Sharder so that
// both split keys alike. It has no dependency beyond the standard library.
package slots

import (
	"encoding/binary"
	"hash/fnv"
)

// Of returns the slot of the object with primary key key among n slots.
// It is a pure function of its arguments (FNV-1a, 64 bits, mixed), the
// same in every process and release, which is what lets replicas agree on
// who owns a key without talking. n must be positive.
func Of(key []byte, n int) int {
	h := fnv.New64a()
	_, _ = h.Write(key)
	return int(mix(h.Sum64()) % uint64(n))
}

// Assign returns the member that owns slot among members by rendezvous
// (highest random weight) hashing: every member scores every slot, and the
// highest score wins (ties go to the lower name). When a member joins it
// wins about 1/N of the slots, each from whoever held it; when one leaves
// only its slots move. It returns "" when members is empty.
func Assign(slot int, members []string) string {
	var best string
	var bestScore uint64
	for _, m := range members {
		if s := score(m, slot); best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

func score(member string, slot int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	var b [9]byte
	b[0] = 0 // separates the name from the slot number
	binary.BigEndian.PutUint64(b[1:], uint64(slot))
	_, _ = h.Write(b[:])
	return mix(h.Sum64())
}

// mix is splitmix64's finalizer: FNV's low bits are weak, and both the
// slot (a modulus) and the rendezvous comparison depend on them.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Package freeport picks 127.0.0.1 ports for test servers that must be
// told their address before they listen (etcd's embedded server takes
// URLs, not listeners).
//
// Asking the kernel for port 0 and closing the listener is racy: that port
// comes from the ephemeral range, and between the close and the server's
// bind any outgoing connection on the machine (a client dialing a proxy,
// another test package) may be given it as its local port. A server that
// restarts on the same port has the same race for longer. So Addr picks
// ports below the ephemeral range, which the kernel never hands out on its
// own, and checks that nothing listens there now.
package freeport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// lowest is the lowest port Addr picks: above the well-known and most
// registered service ports.
const lowest = 12000

// Addr returns "127.0.0.1:port" for a port outside the kernel's ephemeral
// range that was free a moment ago. It fails the test when none is found.
func Addr(t testing.TB) string {
	t.Helper()
	hi := ephemeralLow()
	for range 100 {
		port := lowest + rand.IntN(hi-lowest)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: try another
		}
		l.Close()
		return addr
	}
	t.Fatalf("freeport: no free port in [%d, %d) after 100 tries", lowest, hi)
	return ""
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux:
// /proc/sys/net/ipv4/ip_local_port_range), or Linux's default 32768 when
// unknown (macOS and the BSDs start theirs higher).
func ephemeralLow() int {
	const fallback = 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return fallback
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return fallback
	}
	lo, err := strconv.Atoi(f[0])
	if err != nil || lo <= lowest+1000 {
		return fallback
	}
	return lo
}

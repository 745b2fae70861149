package freeport

import (
	"net"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The port is below the ephemeral range and can be listened on.
func TestAddr(t *testing.T) {
	hi := ephemeralLow()
	for range 20 {
		addr := Addr(t)
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < lowest || port >= hi {
			t.Fatalf("port %d outside [%d, %d)", port, lowest, hi)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("Addr returned %s, which cannot be listened on: %v", addr, err)
		}
		l.Close()
	}
}

// A port that something listens on is never returned.
func TestAddrSkipsTaken(t *testing.T) {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	taken := map[string]bool{}
	for range 50 {
		addr := Addr(t)
		if taken[addr] {
			t.Fatalf("Addr returned %s, which is being listened on", addr)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
		taken[addr] = true
	}
}

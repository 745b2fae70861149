package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/cilium/hive/hivetest"
	"github.com/cilium/hive/shell"
	"github.com/spf13/pflag"

	"github.com/converge-go/converge/internal/netroute/nstest"
)

// An agent that cannot start its kernel side says why and starts nothing.
func TestStartErrors(t *testing.T) {
	nstest.New(t).Close()
	for _, c := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--netns", "/nonexistent/netns"}, "network namespace /nonexistent/netns"},
		{[]string{"--table", "254"}, "--table 254"},
		{[]string{"--protocol", "2"}, "--protocol 2"},
		{[]string{"--device-addrs", "192.0.2.1"}, "--device-addrs"},
	} {
		h := newHive()
		fs := pflag.NewFlagSet("routes", pflag.ContinueOnError)
		h.RegisterFlags(fs)
		flags := []string{"--http-addr", "127.0.0.1:0", "--shell-sock-path", t.TempDir() + "/shell.sock"}
		if err := fs.Parse(append(flags, c.flags...)); err != nil {
			t.Fatal(err)
		}
		log := hivetest.Logger(t)
		err := h.Start(log, t.Context())
		h.Stop(log, context.Background())
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: start: %v, want an error containing %q", c.flags, err, c.want)
		}
	}
}

// testShell: the operator shell answers over its socket, as
// "go run ./example/routes shell reconciler/status" asks it.
func testShell(t *testing.T, a *agent) {
	for cmd, want := range map[string]string{
		"reconciler/status":      "desired-routes",
		"db/show desired-routes": "10.1.0.0/24",
	} {
		var out bytes.Buffer
		if err := shell.ShellExchange(shell.Config{ShellSockPath: a.socket}, &out, cmd); err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
		if !strings.Contains(out.String(), want) {
			t.Fatalf("%s: %q does not contain %q", cmd, out.String(), want)
		}
	}
}

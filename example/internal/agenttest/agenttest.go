// Package agenttest runs an example agent's hive in an end-to-end test
// and talks to it over HTTP, as a user would.
package agenttest

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive"
	"github.com/cilium/hive/hivetest"
	"github.com/spf13/pflag"

	"github.com/converge-go/converge/example/internal/agentkit"
)

// Agent is a running agent: its hive and the URL of its HTTP server.
type Agent struct {
	t       *testing.T
	Hive    *hive.Hive
	URL     string
	client  *http.Client
	stopped bool
}

// Start starts h with args as its command line flags, and stops it when
// the test ends. server returns the agent's HTTP server once the hive has
// started (an Invoke in h captures it); it must listen on 127.0.0.1.
func Start(t *testing.T, h *hive.Hive, args []string, server func() *agentkit.Server) *Agent {
	t.Helper()
	a, err := TryStart(t, h, args, server)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TryStart is Start for a test that expects the start to fail: a hive
// that fails to start is stopped and its error returned.
func TryStart(t *testing.T, h *hive.Hive, args []string, server func() *agentkit.Server) (*Agent, error) {
	t.Helper()
	a := &Agent{
		t:    t,
		Hive: h,
		// No keep-alives: an idle connection's goroutines would outlive
		// the test and trip goleak.
		client: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second},
	}
	fs := pflag.NewFlagSet(t.Name(), pflag.ContinueOnError)
	h.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	log := hivetest.Logger(t)
	if err := h.Start(log, t.Context()); err != nil {
		h.Stop(log, context.Background())
		return nil, err
	}
	a.URL = "http://" + server().Addr()
	t.Cleanup(a.Stop)
	return a, nil
}

// Stop stops the hive, once.
func (a *Agent) Stop() {
	if a.stopped {
		return
	}
	a.stopped = true
	if err := a.Hive.Stop(hivetest.Logger(a.t), context.Background()); err != nil {
		a.t.Errorf("stop: %s", err)
	}
}

// Expect sends a request and fails the test unless the answer has the
// status and contains want. It returns the body.
func (a *Agent) Expect(t *testing.T, method, path, body string, status int, want string) string {
	t.Helper()
	req, err := http.NewRequest(method, a.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status || !strings.Contains(string(b), want) {
		t.Fatalf("%s %s: got %d %q, want %d containing %q", method, path, resp.StatusCode, b, status, want)
	}
	return string(b)
}

// Eventually waits until check passes, looking every every for at most
// within, and fails the test with check's last error otherwise. It is for
// what an agent does on its own time (a repair at the next full
// reconciliation), which the test sees only in the target: there is no
// watch channel to wait on.
func Eventually(t *testing.T, what string, within, every time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s", what, err)
		}
		time.Sleep(every)
	}
}

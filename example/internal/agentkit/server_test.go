package agentkit

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/cell"
	"github.com/cilium/hive/hivetest"
)

// startServer starts a Server of handler on 127.0.0.1 with its timeouts
// cut to what a test can wait for, and stops it when the test ends.
func startServer(t *testing.T, handler http.Handler, tune func(*http.Server)) *Server {
	t.Helper()
	lc := cell.NewDefaultLifecycle(nil, 0, time.Second)
	log := hivetest.Logger(t)
	s := NewServer(lc, log, "127.0.0.1:0", handler)
	if tune != nil {
		tune(s.http)
	}
	if err := lc.Start(log, t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := lc.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	})
	return s
}

// readsBody answers 200 once it has read the whole body, as a PUT does.
var readsBody = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	if _, err := io.ReadAll(r.Body); err != nil {
		WriteError(w, http.StatusBadRequest, err)
		return
	}
	w.WriteHeader(http.StatusOK)
})

// closedByServer reads conn until the server closes it, and fails the
// test if that takes longer than bound (generous: it only ends a test
// that would otherwise hang).
func closedByServer(t *testing.T, conn net.Conn, bound time.Duration) {
	t.Helper()
	conn.SetReadDeadline(time.Now().Add(bound))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %s", bound)
	}
}

// Finding 6: a request whose body stops short of its Content-Length, and
// a kept-alive connection left idle, are cut off by the server (they
// stayed open for ever: only the headers' read was bounded).
func TestServerCutsOffSlowAndIdleClients(t *testing.T) {
	s := startServer(t, readsBody, func(h *http.Server) {
		h.ReadTimeout, h.IdleTimeout = 200*time.Millisecond, 200*time.Millisecond
	})
	for range 5 {
		conn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, "PUT /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\nabc"); err != nil {
			t.Fatal(err)
		}
		closedByServer(t, conn, 30*time.Second)
	}

	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "PUT /x HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("complete request: %v %v", resp, err)
	}
	closedByServer(t, conn, 30*time.Second) // idle after its answer
}

// The examples' servers bound every stage of a request.
func TestServerTimeouts(t *testing.T) {
	s := startServer(t, readsBody, nil)
	h := s.http
	if h.ReadHeaderTimeout <= 0 || h.ReadTimeout <= 0 || h.WriteTimeout <= 0 || h.IdleTimeout <= 0 {
		t.Fatalf("timeouts: header %s, read %s, write %s, idle %s", h.ReadHeaderTimeout, h.ReadTimeout, h.WriteTimeout, h.IdleTimeout)
	}
}

// Item 7: a request whose Host is a name (a page whose DNS name was
// rebound to 127.0.0.1, sent by the user's browser) is refused; IP
// addresses and localhost are served.
func TestServerRefusesRebindableHosts(t *testing.T) {
	s := startServer(t, readsBody, nil)
	_, port, _ := net.SplitHostPort(s.Addr())
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for host, want := range map[string]int{
		"attacker.example:" + port: http.StatusMisdirectedRequest,
		"attacker.example":         http.StatusMisdirectedRequest,
		"localhost.attacker.com":   http.StatusMisdirectedRequest,
		"127.0.0.1:" + port:        http.StatusOK,
		"localhost:" + port:        http.StatusOK,
		"LOCALHOST":                http.StatusOK,
		"app.localhost:" + port:    http.StatusOK,
		"[::1]:" + port:            http.StatusOK,
		"192.0.2.1":                http.StatusOK,
	} {
		req, err := http.NewRequest("PUT", "http://"+s.Addr()+"/x", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// Item 7: /debug/vars serves expvar without the command line, which can
// hold secrets given as flags.
func TestDebugVarsWithoutCommandLine(t *testing.T) {
	rec := httptest.NewRecorder()
	serveVars(rec, httptest.NewRequest("GET", "/debug/vars", nil))
	var vars map[string]json.RawMessage
	if err := json.Unmarshal(rec.Body.Bytes(), &vars); err != nil {
		t.Fatalf("%v: %s", err, rec.Body)
	}
	if _, ok := vars["memstats"]; !ok {
		t.Fatalf("no memstats: %s", rec.Body)
	}
	if _, ok := vars["cmdline"]; ok || strings.Contains(rec.Body.String(), os.Args[0]) {
		t.Fatalf("the command line is shown: %s", rec.Body)
	}
}

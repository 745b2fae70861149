package apiservertest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// Fault decides, per request, whether the request fails: a non-nil
// *metav1.Status is returned to the client as the response (its Code is
// the HTTP status), nil sends the request to the server.
type Fault func(req *http.Request) *metav1.Status

// Status builds the error answer of a Fault: code and reason as the API
// server sends them (403 Forbidden, 409 Conflict, ...).
func Status(code int32, reason metav1.StatusReason, msg string) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusFailure, Code: code, Reason: reason, Message: msg,
	}
}

// switchTransport sends every request to the API server running now, with
// that server's loopback credentials, so that one client survives a
// restart of the server as a client of a real cluster survives a restart
// of its API server.
type switchTransport struct {
	mu      sync.Mutex
	host    string
	token   string
	backend http.RoundTripper
	fault   Fault
	watches map[*cutBody]struct{}
	changed chan struct{} // closed and replaced when watches changes
}

func (t *switchTransport) notifyLocked() {
	close(t.changed)
	t.changed = make(chan struct{})
}

// cutBody is the body of a watch response that cutWatches can close.
type cutBody struct {
	io.ReadCloser
	t *switchTransport
}

func (b *cutBody) Close() error {
	b.t.mu.Lock()
	if _, ok := b.t.watches[b]; ok {
		delete(b.t.watches, b)
		b.t.notifyLocked()
	}
	b.t.mu.Unlock()
	return b.ReadCloser.Close()
}

func (t *switchTransport) cutWatches() {
	t.mu.Lock()
	bodies := make([]*cutBody, 0, len(t.watches))
	for b := range t.watches {
		bodies = append(bodies, b)
	}
	t.mu.Unlock()
	for _, b := range bodies {
		b.Close()
	}
}

func newSwitchTransport() *switchTransport {
	return &switchTransport{watches: map[*cutBody]struct{}{}, changed: make(chan struct{})}
}

// errNoServer is what requests get while the API server is stopped, as a
// client of a stopped server gets "connection refused".
var errNoServer = errors.New("apiservertest: API server is stopped: connection refused")

func (t *switchTransport) setBackend(cfg *rest.Config) error {
	tc, err := cfg.TransportConfig()
	if err != nil {
		return err
	}
	// The server's own TLS settings, without its bearer token: the token
	// is set per request, as the host is.
	tc.BearerToken, tc.BearerTokenFile = "", ""
	rt, err := transport.New(tc)
	if err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.host, t.token, t.backend = hostOf(cfg.Host), cfg.BearerToken, rt
	return nil
}

func hostOf(h string) string {
	req, err := http.NewRequest(http.MethodGet, h, nil)
	if err != nil {
		return h
	}
	return req.URL.Host
}

func (t *switchTransport) clearBackend() {
	t.mu.Lock()
	rt := t.backend
	t.backend = nil
	t.mu.Unlock()
	closeIdle(rt)
}

func (t *switchTransport) close() {
	t.cutWatches()
	t.clearBackend()
}

func closeIdle(rt http.RoundTripper) {
	if c, ok := rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t *switchTransport) setFault(f Fault) {
	t.mu.Lock()
	t.fault = f
	t.mu.Unlock()
}

// RoundTrip implements http.RoundTripper.
func (t *switchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	host, token, rt, fault := t.host, t.token, t.backend, t.fault
	t.mu.Unlock()
	if fault != nil {
		if st := fault(req); st != nil {
			return statusResponse(req, st), nil
		}
	}
	if rt == nil {
		return nil, errNoServer
	}
	if resp, err := t.discovery(req, host, token, rt); resp != nil || err != nil {
		return resp, err
	}
	out := req.Clone(req.Context())
	out.URL.Host = host
	out.Host = host
	out.Header.Set("Authorization", "Bearer "+token)
	strategicToMerge(out)
	resp, err := rt.RoundTrip(out)
	if err != nil || req.URL.Query().Get("watch") != "true" {
		return resp, err
	}
	b := &cutBody{ReadCloser: resp.Body, t: t}
	t.mu.Lock()
	t.watches[b] = struct{}{}
	t.notifyLocked()
	t.mu.Unlock()
	resp.Body = b
	return resp, nil
}

func statusResponse(req *http.Request, st *metav1.Status) *http.Response {
	body, _ := json.Marshal(st)
	if req.Body != nil {
		req.Body.Close()
	}
	return &http.Response{
		StatusCode: int(st.Code),
		Status:     http.StatusText(int(st.Code)),
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    req,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
	}
}

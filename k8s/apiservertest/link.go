package apiservertest

import (
	"io"
	"net/http"
	"sync"

	"k8s.io/client-go/rest"
)

// Link is one client's own connection to the server, which a test can
// make stop answering (Blackhole) without touching the server or the
// other clients: the fault of a network partition between one replica
// and the API server. Create it with Server.NewLink.
type Link struct {
	next http.RoundTripper

	mu   sync.Mutex
	hold chan struct{} // non-nil while blackholed; closed by Restore
}

// NewLink returns a Link to the server. Its Config is the server's
// Config, through the link.
func (s *Server) NewLink() *Link { return &Link{next: s.transport} }

// Config returns a client configuration whose requests go through the
// link. Each call returns a new copy.
func (l *Link) Config() *rest.Config { return newConfig(l) }

// Blackhole makes the link stop answering: a request waits, unanswered,
// until Restore or the end of its context, and so does every response
// and response body not yet read, watches included. Whatever reached
// the server before may have been applied there, as in a real partition.
func (l *Link) Blackhole() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hold == nil {
		l.hold = make(chan struct{})
	}
}

// Restore ends a Blackhole: everything waiting goes on.
func (l *Link) Restore() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.hold != nil {
		close(l.hold)
		l.hold = nil
	}
}

// wait blocks while the link is blackholed, and reports false when done
// ends first.
func (l *Link) wait(done <-chan struct{}) bool {
	l.mu.Lock()
	hold := l.hold
	l.mu.Unlock()
	if hold == nil {
		return true
	}
	select {
	case <-hold:
		return true
	case <-done:
		return false
	}
}

// RoundTrip implements http.RoundTripper.
func (l *Link) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if !l.wait(ctx.Done()) {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, ctx.Err()
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if !l.wait(ctx.Done()) {
		resp.Body.Close()
		return nil, ctx.Err()
	}
	resp.Body = &heldBody{ReadCloser: resp.Body, l: l, done: ctx.Done()}
	return resp, nil
}

// heldBody is a response body whose reads wait while the link is
// blackholed.
type heldBody struct {
	io.ReadCloser
	l    *Link
	done <-chan struct{}
}

func (b *heldBody) Read(p []byte) (int, error) {
	if !b.l.wait(b.done) {
		return 0, io.ErrUnexpectedEOF
	}
	n, err := b.ReadCloser.Read(p)
	// A read that was already waiting for data when the link went down
	// hands nothing over until it is back.
	if !b.l.wait(b.done) {
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

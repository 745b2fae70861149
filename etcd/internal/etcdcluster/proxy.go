package etcdcluster

import (
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections to one etcd endpoint until it is cut.
// Cut stops forwarding without closing anything, as a dropped link does:
// the client's requests and keepalives go unanswered until Restore, or
// until the client gives up. It is how a test partitions one replica from
// etcd while the others keep their own connections.
type Proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	done  bool          // closing: connections accepted now are closed at once
	wake  chan struct{} // closed by Restore
	conns []net.Conn
	wg    sync.WaitGroup
}

// NewProxy starts a proxy to endpoint (a client URL of a member) on
// 127.0.0.1 and stops it in t.Cleanup.
func NewProxy(t testing.TB, endpoint string) *Proxy {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatalf("etcdcluster: proxy: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdcluster: proxy: %v", err)
	}
	p := &Proxy{l: l, target: u.Host, wake: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Endpoint is the URL clients dial to go through the proxy.
func (p *Proxy) Endpoint() string { return "http://" + p.l.Addr().String() }

// Cut stops forwarding bytes in both directions.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// Restore forwards again what was held back and what follows.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		p.cut = false
		close(p.wake)
		p.wake = make(chan struct{})
	}
}

// gate blocks while the proxy is cut; it returns false once the proxy closes.
func (p *Proxy) gate(closed <-chan struct{}) bool {
	for {
		p.mu.Lock()
		cut, wake := p.cut, p.wake
		p.mu.Unlock()
		if !cut {
			return true
		}
		select {
		case <-wake:
		case <-closed:
			return false
		}
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	closed := make(chan struct{})
	defer close(closed)
	for {
		in, err := p.l.Accept()
		if err != nil {
			return
		}
		out, err := net.Dial("tcp", p.target)
		if err != nil {
			in.Close()
			continue
		}
		p.mu.Lock()
		if p.done {
			p.mu.Unlock()
			in.Close()
			out.Close()
			return
		}
		p.conns = append(p.conns, in, out)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(out, in, closed)
		go p.pipe(in, out, closed)
	}
}

// pipe copies src to dst, holding each chunk back while the proxy is cut.
func (p *Proxy) pipe(dst, src net.Conn, closed <-chan struct{}) {
	defer p.wg.Done()
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.gate(closed) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	p.l.Close()
	p.mu.Lock()
	p.done = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.Restore()
	p.wg.Wait()
}

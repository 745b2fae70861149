package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// errTLS is wrapped by what diagnose finds wrong with TLS.
var errTLS = errors.New("TLS")

// diagnose finds why a client of cfg cannot talk to etcd when TLS is the
// reason, which the client itself never says: it shakes hands with each
// endpoint as the client would, and reads the server's first answer,
// where TLS 1.3 servers refuse a missing or unknown client certificate.
// An http:// endpoint of a server that speaks TLS is named too. It
// returns nil when TLS is not the problem (or cannot be checked).
func diagnose(ctx context.Context, cfg clientv3.Config) error {
	for _, ep := range cfg.Endpoints {
		u, err := url.Parse(ep)
		if err != nil || u.Host == "" {
			continue
		}
		switch u.Scheme {
		case "https":
			if reached, _, err := handshake(ctx, u.Host, cfg.TLS); reached && err != nil {
				return fmt.Errorf("%w handshake with %s failed: %w%s", errTLS, u.Host, err, hint(err))
			}
		case "http":
			// Does the server speak TLS? Any certificate will do to tell:
			// nothing is sent over this connection.
			if _, shook, _ := handshake(ctx, u.Host, &tls.Config{InsecureSkipVerify: true}); shook {
				return fmt.Errorf("%w: %s speaks TLS: use an https:// endpoint, with --cacert (and --cert, --key if it asks for a client certificate)", errTLS, u.Host)
			}
		}
	}
	return nil
}

// handshake shakes hands with host as a gRPC client would, and waits
// briefly for the server's first bytes: a refusal of the client's
// certificate comes there (TLS 1.3), not in the handshake. reached is
// false when no connection could be made at all; shook is true when the
// handshake itself completed.
func handshake(ctx context.Context, host string, cfg *tls.Config) (reached, shook bool, err error) {
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg = cfg.Clone()
	cfg.NextProtos = []string{"h2"}
	if cfg.ServerName == "" {
		if h, _, err := net.SplitHostPort(host); err == nil {
			cfg.ServerName = h
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	d := tls.Dialer{Config: cfg}
	conn, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			return false, false, err // not reachable: not a TLS problem
		}
		return true, false, err
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(time.Second))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
		return true, true, err
	}
	return true, true, nil
}

// hint says which flag fixes a TLS error.
func hint(err error) string {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "unknown authority"):
		return " (give the CA that signed the server's certificate with --cacert)"
	case strings.Contains(msg, "certificate required"), strings.Contains(msg, "bad certificate"):
		return " (the server wants a client certificate it trusts: --cert and --key)"
	case strings.Contains(msg, "not valid for"), strings.Contains(msg, "doesn't contain any IP SANs"):
		return " (the endpoint's host is not a name in the server's certificate)"
	}
	return ""
}

// Package hostcheck is the Host rule of the examples' HTTP servers: a
// request whose Host header is a name other than localhost is refused
// with 421 Misdirected Request. The servers have no authentication, and
// a web page whose DNS name its owner points at 127.0.0.1 (DNS
// rebinding) would otherwise reach them from a browser on the host as a
// same-origin site. IP addresses and localhost cannot be rebound.
package hostcheck

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Allowed reports whether a Host header names an IP address or localhost
// (RFC 6761: *.localhost is loopback too), with or without a port. An
// empty one (HTTP/1.0) is allowed: browsers always send one.
func Allowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	lower := strings.ToLower(strings.TrimSuffix(host, "."))
	return host == "" || net.ParseIP(host) != nil || lower == "localhost" || strings.HasSuffix(lower, ".localhost")
}

// Handler serves next the requests whose Host is Allowed, and answers
// the others 421 with {"error": "..."}.
func Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !Allowed(r.Host) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusMisdirectedRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{
				"error": fmt.Sprintf("host %q refused: address the API by IP address or as localhost", r.Host)})
			return
		}
		next.ServeHTTP(w, r)
	})
}

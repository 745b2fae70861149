package main

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/converge-go/converge/reconciler"
)

func TestParseRoute(t *testing.T) {
	for _, c := range []struct {
		spec RouteSpec
		want string // "" for valid, else a part of the error
	}{
		{RouteSpec{Prefix: "10.1.0.0/24", Gateway: "192.0.2.254"}, ""},
		{RouteSpec{Prefix: "10.1.0.0/24", Device: "converge0"}, ""},
		{RouteSpec{Prefix: "0.0.0.0/0", Gateway: "192.0.2.254", Device: "eth0"}, ""},
		{RouteSpec{Prefix: "2001:db8:1::/48", Gateway: "fe80::1", Device: "eth0"}, ""},
		{RouteSpec{Prefix: "10.1.0.1/32", Device: "a-b_c.d"}, ""},

		{RouteSpec{Prefix: "", Device: "eth0"}, `malformed prefix ""`},
		{RouteSpec{Prefix: "10.1.0.0", Device: "eth0"}, "malformed prefix"},
		{RouteSpec{Prefix: "10.1.0.0/33", Device: "eth0"}, "malformed prefix"},
		{RouteSpec{Prefix: "10.1.0.1/24", Device: "eth0"}, "did you mean 10.1.0.0/24?"},
		{RouteSpec{Prefix: "2001:DB8::/32", Device: "eth0"}, "write 2001:db8::/32"},
		{RouteSpec{Prefix: "::ffff:10.0.0.0/104", Device: "eth0"}, "IPv4-mapped"},
		{RouteSpec{Prefix: "fe80::%eth0/64", Device: "eth0"}, "malformed prefix"},
		{RouteSpec{Prefix: "10.1.0.0/24"}, "needs a gateway, a device, or both"},
		{RouteSpec{Prefix: "10.1.0.0/24", Gateway: "192.0.2"}, `malformed gateway "192.0.2"`},
		{RouteSpec{Prefix: "10.1.0.0/24", Gateway: "2001:db8::1"}, "not of the family"},
		{RouteSpec{Prefix: "2001:db8::/32", Gateway: "192.0.2.1"}, "not of the family"},
		{RouteSpec{Prefix: "10.1.0.0/24", Gateway: "0.0.0.0"}, "cannot be a gateway"},
		{RouteSpec{Prefix: "10.1.0.0/24", Gateway: "224.0.0.1"}, "cannot be a gateway"},
		{RouteSpec{Prefix: "2001:db8::/32", Gateway: "fe80::1%eth0"}, "a zone is not allowed"},
		{RouteSpec{Prefix: "2001:db8::/32", Gateway: "::ffff:192.0.2.1"}, "IPv4-mapped"},
		{RouteSpec{Prefix: "10.1.0.0/24", Device: "sixteen-bytes-xx"}, "longer than 15 bytes"},
		{RouteSpec{Prefix: "10.1.0.0/24", Device: "a/b"}, "contains '/'"},
		{RouteSpec{Prefix: "10.1.0.0/24", Device: "eth0:1"}, "contains '/', ':'"},
		{RouteSpec{Prefix: "10.1.0.0/24", Device: ".."}, `device name ".."`},
	} {
		_, err := parseRoute(c.spec)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%+v: %v", c.spec, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%+v: got %v, want an error containing %q", c.spec, err, c.want)
		case err != nil && !errors.Is(err, errInvalidRoute):
			t.Errorf("%+v: %v does not wrap errInvalidRoute", c.spec, err)
		}
	}
}

// FuzzParseRoute checks that parseRoute never panics, and that what it
// accepts is a route the kernel can be given: a canonical prefix (one key
// per route), a gateway of its family, and somewhere to send traffic.
func FuzzParseRoute(f *testing.F) {
	f.Add("10.1.0.0/24", "192.0.2.254", "")
	f.Add("2001:db8:1::/48", "fe80::1", "eth0")
	f.Add("10.1.0.1/24", "", "converge0")
	f.Add("::ffff:10.0.0.0/104", "::ffff:1.2.3.4", "a/b")
	f.Fuzz(func(t *testing.T, prefix, gateway, device string) {
		p, err := parseRoute(RouteSpec{Prefix: prefix, Gateway: gateway, Device: device})
		if err != nil {
			if !errors.Is(err, errInvalidRoute) {
				t.Fatalf("%v does not wrap errInvalidRoute", err)
			}
			return
		}
		if p.prefix.String() != prefix || p.prefix.Masked() != p.prefix {
			t.Fatalf("accepted %q as %v: not canonical", prefix, p.prefix)
		}
		if p.gateway.IsValid() && (p.gateway.Is4() != p.prefix.Addr().Is4() || p.gateway.Zone() != "") {
			t.Fatalf("accepted gateway %v for %v", p.gateway, p.prefix)
		}
		if !p.gateway.IsValid() && p.device == "" {
			t.Fatal("accepted a route with neither gateway nor device")
		}
		if _, err := netip.ParsePrefix(p.prefix.String()); err != nil {
			t.Fatal(err)
		}
		if len(p.device) > maxDeviceName {
			t.Fatalf("accepted device %q", p.device)
		}
	})
}

// db/show and db/cmp print TableRow: its status has no age, so the same
// route prints the same however long ago it was reconciled.
func TestTableRowHasNoAge(t *testing.T) {
	r := &Route{RouteSpec: RouteSpec{Prefix: "10.1.0.0/24", Gateway: "192.0.2.254"},
		Status: reconciler.Status{Kind: reconciler.StatusKindDone, UpdatedAt: time.Now().Add(-time.Hour)}}
	if got, want := strings.Join(r.TableRow(), "|"), "10.1.0.0/24|192.0.2.254||Done"; got != want {
		t.Fatalf("TableRow = %q, want %q", got, want)
	}
}

package main

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// errInvalidRoute is wrapped by every error of parseRoute.
var errInvalidRoute = errors.New("invalid route")

// maxDeviceName is the longest interface name Linux allows (IFNAMSIZ-1).
const maxDeviceName = 15

// parsedRoute is a RouteSpec that passed parseRoute.
type parsedRoute struct {
	prefix  netip.Prefix
	gateway netip.Addr // invalid when there is none
	device  string     // "" when there is none
}

// parseRoute checks a spec and parses it. The errors say what is wrong
// and, where it is clear, what was meant.
//
// The prefix must be in canonical form ("10.1.0.0/24", not "10.1.0.1/24"
// or "010.1.0.0/24"), so that one route has one key in the table. The
// gateway must be of the prefix's family. Whether the gateway is
// reachable and the device exists only the kernel can say, at Update.
func parseRoute(s RouteSpec) (parsedRoute, error) {
	var p parsedRoute
	prefix, err := netip.ParsePrefix(s.Prefix)
	if err != nil {
		return p, fmt.Errorf("%w: malformed prefix %q: want an address and a length such as 10.1.0.0/24", errInvalidRoute, s.Prefix)
	}
	switch {
	case prefix.Addr().Zone() != "":
		return p, fmt.Errorf("%w: prefix %q: a zone is not allowed", errInvalidRoute, s.Prefix)
	case prefix.Addr().Is4In6():
		return p, fmt.Errorf("%w: prefix %q: an IPv4-mapped IPv6 prefix; write the IPv4 prefix", errInvalidRoute, s.Prefix)
	case prefix.Masked() != prefix:
		return p, fmt.Errorf("%w: prefix %q has bits set after the first %d; did you mean %s?", errInvalidRoute, s.Prefix, prefix.Bits(), prefix.Masked())
	case prefix.String() != s.Prefix:
		return p, fmt.Errorf("%w: prefix %q is not in canonical form; write %s", errInvalidRoute, s.Prefix, prefix)
	}
	p.prefix = prefix

	if s.Gateway == "" && s.Device == "" {
		return p, fmt.Errorf("%w: %s needs a gateway, a device, or both", errInvalidRoute, s.Prefix)
	}
	if s.Gateway != "" {
		gw, err := netip.ParseAddr(s.Gateway)
		switch {
		case err != nil:
			return p, fmt.Errorf("%w: malformed gateway %q: want an IP address", errInvalidRoute, s.Gateway)
		case gw.Zone() != "":
			return p, fmt.Errorf("%w: gateway %q: a zone is not allowed; name the device instead", errInvalidRoute, s.Gateway)
		case gw.Is4In6():
			return p, fmt.Errorf("%w: gateway %q: an IPv4-mapped IPv6 address; write the IPv4 address", errInvalidRoute, s.Gateway)
		case gw.Is4() != prefix.Addr().Is4():
			return p, fmt.Errorf("%w: gateway %s is not of the family of %s", errInvalidRoute, gw, prefix)
		case gw.IsUnspecified() || gw.IsMulticast():
			return p, fmt.Errorf("%w: gateway %s cannot be a gateway", errInvalidRoute, gw)
		}
		p.gateway = gw
	}
	if s.Device != "" {
		if err := checkDeviceName(s.Device); err != nil {
			return p, err
		}
		p.device = s.Device
	}
	return p, nil
}

// checkDeviceName applies the kernel's rules for interface names.
func checkDeviceName(name string) error {
	switch {
	case len(name) > maxDeviceName:
		return fmt.Errorf("%w: device name %q is longer than %d bytes", errInvalidRoute, name, maxDeviceName)
	case name == "." || name == "..":
		return fmt.Errorf("%w: device name %q", errInvalidRoute, name)
	case strings.ContainsAny(name, "/: \t\n\r\v\f\x00"):
		return fmt.Errorf("%w: device name %q contains '/', ':', a space or a control character", errInvalidRoute, name)
	}
	return nil
}

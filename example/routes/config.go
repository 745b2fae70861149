package main

import (
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/spf13/pflag"
)

// Config is the agent's command-line configuration; cell.Config turns
// each flag into the field of the same name ("http-addr" is HTTPAddr).
type Config struct {
	HTTPAddr string
	// Netns is the path of an existing network namespace to manage routes
	// in; empty creates a private one.
	Netns       string
	Device      string
	DeviceAddrs []string
	Table       int
	Protocol    int
	Batch       bool
	Concurrency int

	FullReconciliationInterval time.Duration
}

// defaultConfig holds the defaults the flags show.
var defaultConfig = Config{
	HTTPAddr: "127.0.0.1:8081",
	Device:   "converge0",
	// Documentation prefixes (RFC 5737, RFC 3849): routes via gateways in
	// them go nowhere, even if the namespace were the host's.
	DeviceAddrs: []string{"192.0.2.1/24", "2001:db8::1/64"},
	// Table 100 and protocol 201 are unused by iproute2's defaults
	// (/etc/iproute2/rt_tables, rt_protos).
	Table:                      100,
	Protocol:                   201,
	Batch:                      true,
	Concurrency:                1,
	FullReconciliationInterval: 10 * time.Second,
}

// Flags implements cell.Flagger.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("http-addr", def.HTTPAddr,
		"Address of the HTTP API; it has no authentication, so keep it on loopback")
	flags.String("netns", def.Netns,
		"Path of an existing network namespace to manage routes in (e.g. /var/run/netns/NAME); "+
			"empty creates a private namespace that lives as long as the agent")
	flags.String("device", def.Device,
		"Name of the dummy device created in the private namespace")
	flags.StringSlice("device-addrs", def.DeviceAddrs,
		"Addresses of the dummy device: gateways in their subnets are reachable")
	flags.Int("table", def.Table,
		"Routing table the agent owns: its routes go there, and Prune removes routes there of --protocol that nobody desires")
	flags.Int("protocol", def.Protocol,
		"Routing protocol number on the agent's routes; routes in --table with another protocol are left alone")
	flags.Bool("batch", def.Batch,
		"Apply a round's changes in a few netlink system calls (BatchOperations) rather than one request per route")
	flags.Int("concurrency", def.Concurrency,
		"Route operations (or batches) in flight at once")
	flags.Duration("full-reconciliation-interval", def.FullReconciliationInterval,
		"How often to compare the kernel's routes with the desired ones, repairing and pruning")
}

// validate rejects a Config the agent cannot run with.
func (cfg Config) validate() error {
	switch {
	case cfg.Table < 1 || cfg.Table > 0xFFFFFFFF || cfg.Table == 253 || cfg.Table == 254 || cfg.Table == 255:
		// 253-255 are the kernel's default, main and local tables: the
		// agent would prune routes it does not own.
		return fmt.Errorf("--table %d: want 1 to 2^32-1, not 253 (default), 254 (main) or 255 (local)", cfg.Table)
	case cfg.Protocol < 5 || cfg.Protocol > 255:
		// 0-4 are the kernel's own (unspec, redirect, kernel, boot, static).
		return fmt.Errorf("--protocol %d: want 5 to 255; 0-4 are the kernel's and administrators'", cfg.Protocol)
	case cfg.Concurrency < 1:
		return fmt.Errorf("--concurrency must be at least 1, got %d", cfg.Concurrency)
	case cfg.FullReconciliationInterval <= 0:
		return fmt.Errorf("--full-reconciliation-interval must be positive, got %s", cfg.FullReconciliationInterval)
	}
	if err := checkDeviceName(cfg.Device); err != nil || cfg.Device == "" {
		return fmt.Errorf("--device %q: not a valid interface name", cfg.Device)
	}
	if _, err := cfg.deviceAddrs(); err != nil {
		return err
	}
	if _, _, err := net.SplitHostPort(cfg.HTTPAddr); err != nil {
		return fmt.Errorf("--http-addr %q: %w", cfg.HTTPAddr, err)
	}
	return nil
}

// deviceAddrs parses --device-addrs.
func (cfg Config) deviceAddrs() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range cfg.DeviceAddrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("--device-addrs: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

package main

import (
	"fmt"
	"net"
	"time"

	"github.com/spf13/pflag"
)

// Config is the firewall's command-line configuration. cell.Config turns
// each flag into the field of the same name ("http-addr" is HTTPAddr), so
// "go run ./example/firewall --help" lists them.
type Config struct {
	HTTPAddr                   string
	Netns                      string
	Nft                        string
	InputPolicy                string
	FullReconciliationInterval time.Duration
}

// defaultConfig holds the defaults the flags show. The port is not the
// files agent's, so both can run at once.
var defaultConfig = Config{
	HTTPAddr:                   "127.0.0.1:8082",
	Netns:                      "",
	Nft:                        "nft",
	InputPolicy:                "drop",
	FullReconciliationInterval: 10 * time.Second,
}

// Flags implements cell.Flagger.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("http-addr", def.HTTPAddr,
		"Address of the HTTP API; it has no authentication, so keep it on loopback")
	flags.String("netns", def.Netns,
		"Network namespace to keep the table in (/run/netns/NAME or /proc/PID/ns/net); "+
			"empty: a private one the program creates, which goes away with it")
	flags.String("nft", def.Nft, "The nft binary: a path, or a name looked up in PATH, /usr/sbin and /sbin")
	flags.String("input-policy", def.InputPolicy,
		"What the input chain does with packets no rule accepts: drop or accept")
	flags.Duration("full-reconciliation-interval", def.FullReconciliationInterval,
		"How often to load the whole ruleset again, undoing changes made behind the program's back")
}

// validate rejects a Config the firewall cannot run with.
func (cfg Config) validate() error {
	switch {
	case cfg.InputPolicy != "drop" && cfg.InputPolicy != "accept":
		return fmt.Errorf("--input-policy %q: want drop or accept", cfg.InputPolicy)
	case cfg.FullReconciliationInterval <= 0:
		return fmt.Errorf("--full-reconciliation-interval must be positive, got %s", cfg.FullReconciliationInterval)
	case cfg.Nft == "":
		return fmt.Errorf("--nft must not be empty")
	}
	if _, _, err := net.SplitHostPort(cfg.HTTPAddr); err != nil {
		return fmt.Errorf("--http-addr %q: %w", cfg.HTTPAddr, err)
	}
	return nil
}

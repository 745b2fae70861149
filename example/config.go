package main

import (
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/spf13/pflag"
)

// Config is the example's command-line configuration. cell.Config turns
// each flag into the field of the same name ("state-dir" is StateDir), so
// "go run ./example --help" lists them and the hive hands the parsed
// Config to whoever asks for it.
type Config struct {
	StateDir                   string
	DesiredFile                string
	HTTPAddr                   string
	FullReconciliationInterval time.Duration
}

// defaultConfig holds the defaults the flags show.
var defaultConfig = Config{
	StateDir:                   "example-state",
	DesiredFile:                "example-desired.json",
	HTTPAddr:                   "127.0.0.1:8080",
	FullReconciliationInterval: 10 * time.Second,
}

// Flags implements cell.Flagger.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("state-dir", def.StateDir,
		"Directory kept in sync with the desired files; files in it that are not desired are deleted")
	flags.String("desired-file", def.DesiredFile,
		"JSON file the desired files are saved to and loaded from at start, with the --state-dir they are for (must be outside --state-dir)")
	flags.String("http-addr", def.HTTPAddr,
		"Address of the HTTP API; it has no authentication, so keep it on loopback")
	flags.Duration("full-reconciliation-interval", def.FullReconciliationInterval,
		"How often to prune unexpected files and repair files changed behind the program's back")
}

// validate rejects a Config the example cannot run with safely.
func (cfg Config) validate() error {
	switch {
	case cfg.StateDir == "":
		return fmt.Errorf("--state-dir must not be empty")
	case cfg.DesiredFile == "":
		return fmt.Errorf("--desired-file must not be empty")
	case cfg.FullReconciliationInterval <= 0:
		return fmt.Errorf("--full-reconciliation-interval must be positive, got %s", cfg.FullReconciliationInterval)
	}
	if _, _, err := net.SplitHostPort(cfg.HTTPAddr); err != nil {
		return fmt.Errorf("--http-addr %q: %w", cfg.HTTPAddr, err)
	}
	dir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return err
	}
	desired, err := filepath.Abs(cfg.DesiredFile)
	if err != nil {
		return err
	}
	if filepath.Dir(desired) == dir {
		// Prune would delete it as an unexpected file.
		return fmt.Errorf("--desired-file %s must not be inside --state-dir %s", cfg.DesiredFile, cfg.StateDir)
	}
	return nil
}

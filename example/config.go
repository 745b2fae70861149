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
	MaxFiles                   int
	MaxTotalBytes              int64
}

// defaultConfig holds the defaults the flags show.
var defaultConfig = Config{
	StateDir:                   "example-state",
	DesiredFile:                "example-desired.json",
	HTTPAddr:                   "127.0.0.1:8080",
	FullReconciliationInterval: 10 * time.Second,
	MaxFiles:                   1000,
	MaxTotalBytes:              64 << 20,
}

// Flags implements cell.Flagger.
func (def Config) Flags(flags *pflag.FlagSet) {
	flags.String("state-dir", def.StateDir,
		"Directory kept in sync with the desired files; files in it that are not desired are deleted")
	flags.String("desired-file", def.DesiredFile,
		"JSON file that records the --state-dir the desired files are for; they are saved one per file in the directory of "+
			"the same name with .d added, beside it, and loaded from there at start (both must be outside --state-dir)")
	flags.String("http-addr", def.HTTPAddr,
		"Address of the HTTP API; it has no authentication, so keep it on loopback")
	flags.Duration("full-reconciliation-interval", def.FullReconciliationInterval,
		"How often to prune unexpected files and repair files changed behind the program's back")
	flags.Int("max-files", def.MaxFiles,
		"How many files the HTTP API may desire at once; a PUT past it is refused (403)")
	flags.Int64("max-total-bytes", def.MaxTotalBytes,
		"How many bytes of content the HTTP API's files may hold together (the table is in memory); a PUT past it is refused (403)")
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
	case cfg.MaxFiles <= 0:
		return fmt.Errorf("--max-files must be positive, got %d", cfg.MaxFiles)
	case cfg.MaxTotalBytes <= 0:
		return fmt.Errorf("--max-total-bytes must be positive, got %d", cfg.MaxTotalBytes)
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
	if defaultSpecDir(desired) == dir {
		// Prune would delete the desired files.
		return fmt.Errorf("--state-dir %s must not be the desired files' directory %s", cfg.StateDir, defaultSpecDir(cfg.DesiredFile))
	}
	return nil
}

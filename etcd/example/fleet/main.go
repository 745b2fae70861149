package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/converge-go/converge/etcd/shard"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "view" {
		os.Exit(viewMain(os.Args[2:]))
	}
	os.Exit(runMain(os.Args[1:]))
}

// commonFlags are the flags of both subcommands: etcd's client settings
// (clientFlags) and the fleet's.
func commonFlags(fs *flag.FlagSet, o *options) *clientFlags {
	c := addClientFlags(fs)
	fs.StringVar(&o.prefix, "prefix", "/fleet", "the fleet's etcd key prefix")
	fs.BoolVar(&o.leaderOnly, "leader-only", false, "one replica (the elected leader) applies every group, instead of sharding")
	return c
}

// dial returns a client of the etcd the flags describe (see connect).
func dial(c *clientFlags, prefix string, warn func(error)) (*clientv3.Client, error) {
	cfg, err := c.config(os.Getenv)
	if err != nil {
		return nil, err
	}
	return connect(context.Background(), cfg, prefix, warn)
}

// runMain runs one replica until SIGINT or SIGTERM.
func runMain(args []string) int {
	fs := flag.NewFlagSet("fleet", flag.ExitOnError)
	host, _ := os.Hostname()
	o := options{events: os.Stdout}
	etcd := commonFlags(fs, &o)
	fs.StringVar(&o.name, "name", host, "this replica's name: unique and stable across restarts")
	fs.IntVar(&o.slots, "slots", shard.DefaultSlots, "number of slots (the same on every replica)")
	fs.DurationVar(&o.ttl, "ttl", shard.DefaultTTL, "lease TTL, whole seconds: a crashed replica's groups move after about this long")
	fs.IntVar(&o.concurrency, "concurrency", 16, "operations on the fleet at once, per replica")
	fs.DurationVar(&o.callTime, "call-time", 10*time.Millisecond, "how long one call to the fleet's API takes (the target is simulated in etcd)")
	fs.DurationVar(&o.opTimeout, "op-timeout", 10*time.Second, "bound of one operation, and of the wait for operations in flight at a handover")
	fs.BoolVar(&o.ignoreCancel, "ignore-cancel", false, "fault injection: an operation's final write ignores its cancellation, as a paused process's would")
	fs.StringVar(&o.httpAddr, "http", "", "serve GET /view and /status at this address (\"\": off)")
	fs.DurationVar(&o.summaryEvery, "summary-interval", 2*time.Second, "how often at most a replica republishes its counts")
	_ = fs.Parse(args)
	log := slog.New(slog.NewTextHandler(os.Stderr, nil)).With("replica", o.name)
	cli, err := dial(etcd, o.prefix, func(err error) { log.Warn("etcd does not answer yet; retrying", "error", err) })
	if err != nil {
		log.Error("etcd client", "error", err)
		return 1
	}
	defer cli.Close()
	if err := newHive(o, cli).Run(log); err != nil {
		log.Error("fleet", "error", err)
		return 1
	}
	return 0
}

// viewMain prints the cluster-wide view and exits 0 when the whole desired
// set is Done, 1 when it is not, 2 when etcd cannot be read.
func viewMain(args []string) int {
	fs := flag.NewFlagSet("fleet view", flag.ExitOnError)
	var o options
	etcd := commonFlags(fs, &o)
	asJSON := fs.Bool("json", false, "print the view as JSON")
	_ = fs.Parse(args)
	cli, err := dial(etcd, o.prefix, func(err error) { fmt.Fprintln(os.Stderr, "fleet view:", err) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "fleet view:", err)
		return 2
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	done, err := printView(ctx, os.Stdout, cli, o, *asJSON)
	switch {
	case err != nil:
		fmt.Fprintln(os.Stderr, "fleet view:", err)
		return 2
	case !done:
		return 1
	}
	return 0
}

func zapNop() *zap.Logger { return zap.NewNop() }

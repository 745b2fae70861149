// Command replicas measures converge's replicas on etcd (issue 20's
// benchmark rows): failover after a SIGKILL, graceful handover of slots,
// scale-out from 1 to 3 replicas, and the coordination cost in etcd
// writes. It runs its own etcd (embedded, on 127.0.0.1) and prints a table.
//
//	cd benchmarks/replicas && go run .              # every row, 5-8 minutes on 2 cores
//	go run . -only failover                          # rows by regexp: failover, handover, scale-out, coordination, limits
//	go run . -quick                                  # every size shrunk, under a minute
//	go run . -json
//
// It is a module of its own so that the core module's benchmarks never
// link etcd. See benchmarks/README.md for what each row measures, and
// docs/replicas.md for how far the design scales.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/converge-go/converge/etcd/shard"
)

func main() {
	if os.Getenv(replicaEnv) != "" {
		os.Exit(replicaMain(os.Args[1:], os.Stderr))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	only        *regexp.Regexp
	json        bool
	slots       int
	ttl         time.Duration // the in-process rows' lease TTL
	concurrency int
	delay       time.Duration
	drain       time.Duration // shard.Config.DrainTimeout

	failoverRuns    int
	failoverObjects int
	failoverTTL     time.Duration

	handoverCycles  int
	handoverObjects int
	handoverChurn   int

	scaleObjects int
	scaleWarmup  time.Duration
	scalePairs   int

	coordObjects []int
	coordWindow  time.Duration
	coordSummary time.Duration
	coordChurn   int

	limitsMax int // the most slots × members the limits rows compute
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("replicas", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := options{}
	only := fs.String("only", "", "run only the rows whose name matches this `regexp` (failover, handover, scale-out, coordination, limits)")
	quick := fs.Bool("quick", false, "shrink every size not given explicitly, for a run under a minute")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per row instead of the table")
	fs.IntVar(&o.slots, "slots", 256, "slots of every shard group (shard.DefaultSlots)")
	fs.DurationVar(&o.ttl, "ttl", 5*time.Second, "lease TTL of the in-process replicas")
	fs.IntVar(&o.concurrency, "concurrency", 16, "every reconciler's Concurrency")
	fs.DurationVar(&o.drain, "drain-timeout", shard.DefaultDrainTimeout, "shard.Config.DrainTimeout of every replica")
	fs.DurationVar(&o.delay, "delay", 10*time.Millisecond, "how long one operation takes (handover, scale-out)")
	fs.IntVar(&o.failoverRuns, "failover-runs", 3, "failover: SIGKILLs, each of a fresh group of 3 processes")
	fs.IntVar(&o.failoverObjects, "failover-objects", 3000, "failover: objects")
	fs.DurationVar(&o.failoverTTL, "failover-ttl", 5*time.Second, "failover: lease TTL")
	fs.IntVar(&o.handoverCycles, "handover-cycles", 5, "handover: joins and clean stops of a fourth replica")
	fs.IntVar(&o.handoverObjects, "handover-objects", 10000, "handover: objects")
	fs.IntVar(&o.handoverChurn, "handover-churn", 600, "handover: changes per second during the handovers")
	fs.IntVar(&o.scaleObjects, "scale-objects", 40000, "scale-out: objects")
	fs.IntVar(&o.scalePairs, "scale-pairs", 3, "scale-out: runs of 1 and 3 replicas, in alternation")
	fs.DurationVar(&o.scaleWarmup, "scale-warmup", time.Second, "scale-out: time after the load before the steady window opens")
	coordObjects := fs.String("coordination-objects", "10000,1000000", "coordination: object counts, comma-separated")
	fs.DurationVar(&o.coordWindow, "coordination-window", 10*time.Second, "coordination: the measured window")
	fs.DurationVar(&o.coordSummary, "coordination-summary", time.Second, "coordination: shard.Config.SummaryInterval (default 10s in shard)")
	fs.IntVar(&o.coordChurn, "coordination-churn", 100, "coordination: changes per second during the window")
	fs.IntVar(&o.limitsMax, "limits-max", 100_000_000, "limits: skip the assignments of more slots × members than this")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *quick {
		for name, v := range quickSizes {
			if !set[name] {
				if err := fs.Set(name, v); err != nil {
					return o, err
				}
			}
		}
		if !set["coordination-objects"] {
			*coordObjects = "1000,100000"
		}
	}
	for _, s := range strings.Split(*coordObjects, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-coordination-objects: %q is not a positive count", s)
		}
		o.coordObjects = append(o.coordObjects, n)
	}
	var err error
	if o.only, err = regexp.Compile(*only); err != nil {
		return o, fmt.Errorf("-only: %w", err)
	}
	return o, o.validate()
}

// quickSizes are -quick's sizes.
var quickSizes = map[string]string{
	"failover-runs": "1", "failover-objects": "500", "handover-cycles": "2", "handover-objects": "2000",
	"scale-objects": "15000", "scale-pairs": "1", "scale-warmup": "500ms", "coordination-window": "3s",
	"limits-max": "500000",
}

func (o options) validate() error {
	for name, n := range map[string]int{
		"slots": o.slots, "concurrency": o.concurrency, "failover-runs": o.failoverRuns,
		"failover-objects": o.failoverObjects, "handover-cycles": o.handoverCycles,
		"handover-objects": o.handoverObjects, "handover-churn": o.handoverChurn,
		"scale-objects": o.scaleObjects, "scale-pairs": o.scalePairs, "coordination-churn": o.coordChurn, "limits-max": o.limitsMax,
	} {
		if n < 1 {
			return fmt.Errorf("-%s must be at least 1", name)
		}
	}
	if o.coordWindow <= 0 || o.coordSummary <= 0 || o.delay <= 0 || o.drain <= 0 {
		return errors.New("-coordination-window, -coordination-summary, -delay and -drain-timeout must be positive")
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "replicas:", err)
		return 2
	}
	// Replica processes and the harness write progress at once.
	rows, err := runRows(o, &lockedWriter{w: stderr})
	if err != nil {
		fmt.Fprintln(stderr, "replicas:", err)
		return 1
	}
	if o.json {
		err = writeJSON(stdout, rows)
	} else {
		err = writeTable(stdout, rows)
	}
	if err != nil {
		fmt.Fprintln(stderr, "replicas:", err)
		return 1
	}
	return 0
}

// runRows starts etcd and runs the selected rows against it.
func runRows(o options, log io.Writer) ([]row, error) {
	srv, err := startEtcd()
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	cli, err := newClient(srv.endpoint())
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	fmt.Fprintf(log, "replicas on etcd: %d slots, GOMAXPROCS=%d, %s, etcd at %s\n",
		o.slots, runtime.GOMAXPROCS(0), runtime.Version(), srv.endpoint())
	steps := []struct {
		name string
		run  func() ([]row, error)
	}{
		{"failover", func() ([]row, error) { return failover(o, cli, srv.endpoint(), log) }},
		{"handover", func() ([]row, error) { return handover(o, cli, log) }},
		{"scale-out", func() ([]row, error) { return scaleOut(o, cli, log) }},
		{"coordination", func() ([]row, error) { return coordination(o, cli, srv, log) }},
		{"limits", func() ([]row, error) { return limits(o, log), nil }},
	}
	var rows []row
	for _, s := range steps {
		if !o.only.MatchString(s.name) {
			continue
		}
		start := time.Now()
		r, err := s.run()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Fprintf(log, "%s: %v\n", s.name, time.Since(start).Round(time.Second))
		rows = append(rows, r...)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no row matches -only %q", o.only)
	}
	return rows, nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

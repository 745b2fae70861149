// Command benchmarks runs converge's reconciler and the incumbent,
// github.com/cilium/statedb/reconciler, on the same workloads in the same
// process, in alternation, and prints a table of medians and ratios.
//
//	go run ./benchmarks                 # every workload, 3 pairs of runs
//	go run ./benchmarks -quick          # smaller sizes, about two minutes
//	go run ./benchmarks -only 'noop|full' -json
//	go run ./benchmarks -only noop -side converge -cpuprofile cpu.out
//	go run ./benchmarks -only latency   # isolated changes, trickles, a trickle during a bulk load
//	go run ./benchmarks -only routes    # kernel routes over netlink; needs root
//
// See benchmarks/README.md for what each workload measures.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command's flags.
type options struct {
	sizes
	pairs      int
	only       *regexp.Regexp
	side       string
	json       bool
	cpuprofile string
	memprofile string
	trace      string
}

// parseFlags parses args. -quick picks quickSizes for every size flag not
// given explicitly.
func parseFlags(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("benchmarks", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	o.sizes = fullSizes()
	quick := fs.Bool("quick", false, "shrink every workload so the whole run takes about two minutes")
	only := fs.String("only", "", "run only the workloads whose name matches this `regex`p")
	fs.StringVar(&o.side, "side", "", "run only this side: converge, statedb or limit (for profiling one side)")
	fs.BoolVar(&o.json, "json", false, "print one JSON object per row instead of the table")
	fs.IntVar(&o.pairs, "pairs", 3, "runs of each variant, in alternation")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile to `file` (runs are labelled workload=, variant=)")
	fs.StringVar(&o.memprofile, "memprofile", "", "write an allocation profile to `file` at the end")
	fs.StringVar(&o.trace, "trace", "", "write a runtime execution trace to `file` (go tool trace; keep -only and -pairs small)")

	fs.IntVar(&o.noopObjects, "noop-objects", o.noopObjects, "noop-1m: objects")
	fs.IntVar(&o.insertBatch, "insert-batch", o.insertBatch, "objects per insert transaction")
	fs.IntVar(&o.slowObjects, "slow-objects", o.slowObjects, "slow-1ms: objects, at least")
	fs.IntVar(&o.slowPerWorker, "slow-per-worker", o.slowPerWorker, "slow-1ms: objects per worker, at least (more objects at high Concurrency)")
	fs.DurationVar(&o.slowDelay, "slow-delay", o.slowDelay, "slow-1ms: how long each Update sleeps")
	fs.IntVar(&o.latencySmall, "latency-small", o.latencySmall, "latency: Done objects in the small table")
	fs.IntVar(&o.latencyLarge, "latency-large", o.latencyLarge, "latency: Done objects in the large table")
	fs.IntVar(&o.latencySamples, "latency-samples", o.latencySamples, "latency: changes measured per run")
	fs.DurationVar(&o.latencyGap, "latency-gap", o.latencyGap, "latency: pause before each change (lets the round limiter refill)")
	fs.IntVar(&o.trickleSamples, "trickle-samples", o.trickleSamples, "latency/trickle-*: changes measured per run")
	fs.IntVar(&o.bulkObjects, "bulk-objects", o.bulkObjects, "latency/bulk+trickle: new objects per bulk load")
	fs.IntVar(&o.bulkLoads, "bulk-loads", o.bulkLoads, "latency/bulk+trickle: bulk loads per run (the trickle's changes during all of them are measured)")
	fs.IntVar(&o.retryObjects, "retry-objects", o.retryObjects, "retry-storm: objects")
	fs.DurationVar(&o.retryHeal, "retry-heal", o.retryHeal, "retry-storm: how long the target fails")
	fs.IntVar(&o.fullObjects, "full-objects", o.fullObjects, "full: objects")
	fs.IntVar(&o.syncObjects, "sync-objects", o.syncObjects, "sync-storm: objects in the table")
	fs.IntVar(&o.syncRate, "sync-rate", o.syncRate, "sync-storm: single-object changes per second")
	fs.DurationVar(&o.syncDuration, "sync-duration", o.syncDuration, "sync-storm: how long the storm lasts")
	fs.IntVar(&o.routesSmall, "routes-small", o.routesSmall, "routes-<n>: kernel routes in the small run (needs root)")
	fs.IntVar(&o.routesLarge, "routes-large", o.routesLarge, "routes-<n>: kernel routes in the large run (needs root)")
	fs.IntVar(&o.wakeResidentMiB, "wake-resident-mib", o.wakeResidentMiB, "machine/wake: the large heap held resident, in MiB")
	fs.IntVar(&o.sourceObjects, "source-objects", o.sourceObjects, "source: objects listed, and events applied")
	fs.IntVar(&o.sourceFiles, "source-files", o.sourceFiles, "files: manifest files of 10 objects each")
	fs.IntVar(&o.fileEdits, "file-edits", o.fileEdits, "files: single-file edits measured per run")
	fs.IntVar(&o.backlogObjects, "backlog-objects", o.backlogObjects, "startup+changes, noisy-tenant: objects in the backlog")
	fs.IntVar(&o.backlogSamples, "backlog-samples", o.backlogSamples, "startup+changes, noisy-tenant: changes measured with no backlog")
	fs.IntVar(&o.hungObjects, "hung-objects", o.hungObjects, "hung-target: objects over the four targets")
	fs.DurationVar(&o.hungWindow, "hung-window", o.hungWindow, "hung-target: how long the healthy targets' throughput is measured")
	o.deps.flags(fs)
	fs.DurationVar(&o.runTimeout, "run-timeout", o.runTimeout, "the most one run may take")

	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		q := quickSizes()
		quickFields := sizeFields(&q)
		for name, p := range sizeFields(&o.sizes) {
			if set[name] {
				continue
			}
			switch p := p.(type) {
			case *int:
				*p = *quickFields[name].(*int)
			case *time.Duration:
				*p = *quickFields[name].(*time.Duration)
			}
		}
	}
	var err error
	if o.only, err = regexp.Compile(*only); err != nil {
		return o, fmt.Errorf("-only: %w", err)
	}
	switch o.side {
	case "", sideConverge, sideStatedb, sideLimit:
	default:
		return o, fmt.Errorf("-side must be converge, statedb or limit, not %q", o.side)
	}
	if o.pairs < 1 {
		return o, errors.New("-pairs must be at least 1")
	}
	for name, n := range map[string]int{
		"noop-objects": o.noopObjects, "insert-batch": o.insertBatch, "slow-objects": o.slowObjects,
		"latency-small": o.latencySmall, "latency-large": o.latencyLarge, "latency-samples": o.latencySamples,
		"trickle-samples": o.trickleSamples, "bulk-objects": o.bulkObjects, "bulk-loads": o.bulkLoads,
		"retry-objects": o.retryObjects, "full-objects": o.fullObjects,
		"sync-objects": o.syncObjects, "sync-rate": o.syncRate,
		"routes-small": o.routesSmall, "routes-large": o.routesLarge, "wake-resident-mib": o.wakeResidentMiB,
		"backlog-objects": o.backlogObjects, "backlog-samples": o.backlogSamples, "hung-objects": o.hungObjects,
	} {
		if n < 1 {
			return o, fmt.Errorf("-%s must be at least 1", name)
		}
	}
	if o.slowPerWorker < 0 {
		return o, errors.New("-slow-per-worker must not be negative")
	}
	if o.syncDuration <= 0 {
		return o, errors.New("-sync-duration must be positive")
	}
	if o.hungWindow <= 0 {
		return o, errors.New("-hung-window must be positive")
	}
	if err := o.deps.check(); err != nil {
		return o, err
	}
	return o, nil
}

// sizeFields maps each size flag's name to its field in s.
func sizeFields(s *sizes) map[string]any {
	m := map[string]any{
		"noop-objects": &s.noopObjects, "insert-batch": &s.insertBatch, "slow-objects": &s.slowObjects,
		"slow-per-worker": &s.slowPerWorker, "slow-delay": &s.slowDelay, "latency-small": &s.latencySmall, "latency-large": &s.latencyLarge,
		"latency-samples": &s.latencySamples, "latency-gap": &s.latencyGap,
		"trickle-samples": &s.trickleSamples, "bulk-objects": &s.bulkObjects, "bulk-loads": &s.bulkLoads,
		"retry-objects": &s.retryObjects, "retry-heal": &s.retryHeal,
		"full-objects": &s.fullObjects, "run-timeout": &s.runTimeout,
		"sync-objects": &s.syncObjects, "sync-rate": &s.syncRate, "sync-duration": &s.syncDuration,
		"routes-small": &s.routesSmall, "routes-large": &s.routesLarge,
		"wake-resident-mib": &s.wakeResidentMiB,
		"source-objects":    &s.sourceObjects, "source-files": &s.sourceFiles, "file-edits": &s.fileEdits,
		"backlog-objects": &s.backlogObjects, "backlog-samples": &s.backlogSamples,
		"hung-objects": &s.hungObjects, "hung-window": &s.hungWindow,
	}
	s.deps.fields(m)
	return m
}

func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "benchmarks:", err)
		return 2
	}
	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			fmt.Fprintln(stderr, "benchmarks:", err)
			return 1
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(stderr, "benchmarks:", err)
			return 1
		}
		defer pprof.StopCPUProfile()
	}
	if o.trace != "" {
		stop, err := startTrace(o.trace)
		if err != nil {
			fmt.Fprintln(stderr, "benchmarks:", err)
			return 1
		}
		defer stop()
	}

	fmt.Fprintf(stderr, "converge vs statedb/reconciler: %d pairs per workload, GOMAXPROCS=%d, %s\n",
		o.pairs, runtime.GOMAXPROCS(0), runtime.Version())
	rows, err := runSuite(o, stderr)
	if err != nil {
		fmt.Fprintln(stderr, "benchmarks:", err)
		return 1
	}
	if o.json {
		err = writeJSON(stdout, rows)
	} else {
		fmt.Fprintln(stdout, sizesLine(o.sizes))
		err = writeTable(stdout, rows)
	}
	if err != nil {
		fmt.Fprintln(stderr, "benchmarks:", err)
		return 1
	}

	if o.memprofile != "" {
		if err := writeMemProfile(o.memprofile); err != nil {
			fmt.Fprintln(stderr, "benchmarks:", err)
			return 1
		}
	}
	return 0
}

func writeMemProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runSuite runs the selected workloads and returns their rows. Progress
// goes to log.
func runSuite(o options, log io.Writer) ([]row, error) {
	var rows []row
	var skipped []error
	for _, w := range workloads(o.sizes) {
		if !o.only.MatchString(w.name) {
			continue
		}
		if w.skip != nil {
			if err := w.skip(); err != nil {
				fmt.Fprintf(log, "%s: skipped: %v\n", w.name, err)
				skipped = append(skipped, fmt.Errorf("%s skipped: %w", w.name, err))
				continue
			}
		}
		r, err := runWorkload(w, o, log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.name, err)
		}
		rows = append(rows, r...)
	}
	if len(rows) == 0 && len(skipped) > 0 {
		return nil, errors.Join(skipped...)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("no workload matches -only %q", o.only)
	}
	return rows, nil
}

// runWorkload runs the workload's variants in alternation, o.pairs times
// each, and summarizes the medians in rows.
func runWorkload(w workload, o options, log io.Writer) ([]row, error) {
	results := map[string][]measure{}
	for i := range o.pairs {
		for _, v := range w.variants {
			if o.side != "" && v.side != o.side {
				continue
			}
			m, err := runOnce(w, v, o.runTimeout)
			if err != nil {
				return nil, fmt.Errorf("%s run %d: %w", v.name, i+1, err)
			}
			results[v.name] = append(results[v.name], m)
			fmt.Fprintf(log, "%-12s %-14s run %d/%d: %s\n", w.name, v.name, i+1, o.pairs, m)
		}
	}
	return summarize(w, results), nil
}

// runOnce runs one variant once, between two garbage collections, with the
// run labelled for the CPU profile. It fails if a goroutine the run started
// is still running afterwards.
func runOnce(w workload, v variant, timeout time.Duration) (measure, error) {
	// Start every run from the same state: the previous run's garbage
	// collected and its memory returned to the OS, so that no run pays for
	// (or profits from) another's heap.
	debug.FreeOSMemory()
	before := runtime.NumGoroutine()
	var m measure
	var err error
	pprof.Do(context.Background(), pprof.Labels("workload", w.name, "variant", v.name), func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		m, err = v.run(ctx)
	})
	if err != nil {
		return nil, err
	}
	if err := waitGoroutines(before, 5*time.Second); err != nil {
		return nil, err
	}
	runtime.GC()
	return m, nil
}

// waitGoroutines waits until no more than n goroutines run: a stopped hive
// may take a moment to let its last goroutines return.
func waitGoroutines(n int, patience time.Duration) error {
	deadline := time.Now().Add(patience)
	for runtime.NumGoroutine() > n {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			return fmt.Errorf("%d goroutines left running after the run (%d before):\n%s",
				runtime.NumGoroutine(), n, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return nil
}

// startTrace writes a runtime execution trace to path until stop is
// called: where a run waits (scheduling, wake-ups, lock hand-offs) shows
// there, not in a CPU profile.
func startTrace(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := trace.Start(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { trace.Stop(); f.Close() }, nil
}

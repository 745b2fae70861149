package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// coordination measures issue 20's coordination-cost row: the etcd writes
// per second of three replicas at steady state, for each object count.
// The replicas are real reconcilers (Concurrency 16, an instant target)
// that first reconcile every object; then, during the window, a churn of
// o.coordChurn objects a second added and removed keeps every replica's
// counts changing, so each republishes its summary at every
// SummaryInterval: the most writes the design makes. The target writes
// nothing to etcd: every write counted is coordination (member keys,
// claims, summaries). Lease keepalives are not writes; they are counted
// apart, as are raft proposals (writes, lease grants and revokes).
func coordination(o options, cli *clientv3.Client, srv *etcdServer, log io.Writer) ([]row, error) {
	var rows []row
	// Summaries are republished on a timer, at most once per
	// SummaryInterval per replica whatever the object count; claims and
	// member keys do not change at steady state. The window may catch one
	// more write per replica by the timer's phase.
	limit := 3/o.coordSummary.Seconds() + 3/o.coordWindow.Seconds()
	limit = math.Round(limit*100) / 100
	for i, objects := range o.coordObjects {
		r, err := coordinationOnce(o, cli, srv, objects, i, log)
		if err != nil {
			return nil, err
		}
		detail := fmt.Sprintf("3 replicas, SummaryInterval %v, %d objects/s added and removed; %.1f raft proposals/s, %.1f lease keepalives/s; summaries of %d bytes",
			o.coordSummary, o.coordChurn, r.proposals, r.keepalives, r.summaryBytes)
		rows = append(rows, atMost(fmt.Sprintf("coordination/%s-objects", short(objects)), r.writes, "writes/s", limit, detail))
	}
	return rows, nil
}

type coordRun struct {
	writes, proposals, keepalives float64
	summaryBytes                  int // the largest summary
}

func coordinationOnce(o options, cli *clientv3.Client, srv *etcdServer, objects, n int, log io.Writer) (coordRun, error) {
	const patience = 5 * time.Minute
	o.ttl = 5 * time.Second // the default TTL: its keepalives are part of the cost
	f := newFleet(cli, fmt.Sprintf("/bench/coordination-%d", n), o, objects, 0)
	f.summary = o.coordSummary
	// The churn adds and removes objects, so the counts in every
	// replica's summary keep changing: the most summary writes there
	// can be.
	f.extra = max(1, objects/100)
	defer f.stopAll()
	g, err := watchGroup(cli, f.prefix, o.slots)
	if err != nil {
		return coordRun{}, err
	}
	defer g.stop()
	names := []string{"a", "b", "c"}
	start := time.Now()
	for _, name := range names {
		if err := f.add(name); err != nil {
			return coordRun{}, err
		}
	}
	if err := g.waitFor(patience, g.balanced(names...)); err != nil {
		return coordRun{}, err
	}
	if err := f.waitSettled(patience); err != nil {
		return coordRun{}, err
	}
	fmt.Fprintf(log, "coordination %s objects: loaded and reconciled in %v\n", short(objects), time.Since(start).Round(time.Millisecond))
	f.startChurn(o.coordChurn)
	// One summary interval for the churn to reach every replica's counts.
	time.Sleep(o.coordSummary)

	ctx := context.Background()
	rev0, err := srv.revision(ctx, cli)
	if err != nil {
		return coordRun{}, err
	}
	p0, k0 := etcdCounter("etcd_server_proposals_committed_total"), etcdCounter("etcd_debugging_lease_renewed_total")
	t0 := time.Now()
	time.Sleep(o.coordWindow) // the measured window
	rev1, err := srv.revision(ctx, cli)
	if err != nil {
		return coordRun{}, err
	}
	p1, k1 := etcdCounter("etcd_server_proposals_committed_total"), etcdCounter("etcd_debugging_lease_renewed_total")
	secs := time.Since(t0).Seconds()
	r := coordRun{writes: float64(rev1-rev0) / secs, proposals: (p1 - p0) / secs, keepalives: (k1 - k0) / secs}
	if r.summaryBytes, err = summarySize(cli, f.prefix); err != nil {
		return coordRun{}, err
	}
	fmt.Fprintf(log, "coordination %s objects: %.2f writes/s over %v\n", short(objects), r.writes, o.coordWindow)
	return r, f.stopAll()
}

// etcdCounter reads one of the embedded etcd's metrics (it registers them
// with Prometheus' default registry); NaN if it has none.
func etcdCounter(name string) float64 {
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		return math.NaN()
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		var sum float64
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
		return sum
	}
	return math.NaN()
}

// short prints 10000 as 10k and 1000000 as 1M.
func short(n int) string {
	switch {
	case n >= 1_000_000 && n%1_000_000 == 0:
		return fmt.Sprintf("%dM", n/1_000_000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// cpuTime is the process's CPU time so far, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func numCPU() int { return runtime.GOMAXPROCS(0) }

// runQueueWait is the time the process's threads have spent runnable but
// waiting for a CPU (the second field of /proc/self/task/*/schedstat); 0
// where there is no such file.
func runQueueWait() time.Duration {
	tasks, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var sum int64
	for _, p := range tasks {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		fields := strings.Fields(string(b))
		if len(fields) < 2 {
			continue
		}
		if n, err := strconv.ParseInt(fields[1], 10, 64); err == nil {
			sum += n
		}
	}
	return time.Duration(sum)
}

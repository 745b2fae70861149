package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/shard"
)

// replicaEnv, set in a process's environment, makes the harness binary run
// as one replica (replicaMain) instead of the harness: the failover row
// re-executes itself this way, so that a replica is a real process that
// SIGKILL can end.
const replicaEnv = "CONVERGE_REPLICAS_BENCH_REPLICA"

// replicaMain runs one replica process until SIGTERM or SIGINT: a hive
// with a shard.Manager and a reconciler (Concurrency 16) whose target is
// etcd itself, every write fenced by the slot's token. Its table holds the
// whole desired set from the start.
func replicaMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("replica", flag.ContinueOnError)
	fs.SetOutput(stderr)
	endpoint := fs.String("endpoint", "", "etcd client URL")
	prefix := fs.String("prefix", "", "the run's key prefix")
	name := fs.String("name", "", "replica name")
	objects := fs.Int("objects", 0, "desired objects")
	slots := fs.Int("slots", 256, "slots")
	ttl := fs.Duration("ttl", 5*time.Second, "lease TTL")
	conc := fs.Int("concurrency", 16, "reconciler Concurrency")
	drain := fs.Duration("drain-timeout", shard.DefaultDrainTimeout, "shard.Config.DrainTimeout")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cli, err := newClient(*endpoint)
	if err != nil {
		fmt.Fprintln(stderr, "replica:", err)
		return 1
	}
	defer cli.Close()
	r, err := newReplica(replicaConfig{cli: cli, prefix: *prefix + "/shards", name: *name, slots: *slots, ttl: *ttl,
		drainTimeout: *drain, concurrency: *conc, ops: &etcdOps{cli: cli, prefix: *prefix, name: *name}})
	if err != nil {
		fmt.Fprintln(stderr, "replica:", err)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := r.start(); err != nil {
		fmt.Fprintln(stderr, "replica:", err)
		return 1
	}
	// The desired set arrives once the harness has seen the group
	// settle, so that every object is first reconciled by the owner
	// it has when the victim is killed, not by one that held its slot
	// for a moment while the replicas were joining.
	if err := waitForKey(ctx, cli, *prefix+"/go"); err == nil {
		r.desire(0, *objects, 1)
	}
	<-ctx.Done()
	if err := r.stop(); err != nil {
		fmt.Fprintln(stderr, "replica:", err)
		return 1
	}
	return 0
}

// waitForKey returns once key exists in etcd, or with ctx's error.
func waitForKey(ctx context.Context, cli *clientv3.Client, key string) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	resp, err := cli.Get(ctx, key)
	if err != nil {
		return err
	}
	if len(resp.Kvs) > 0 {
		return nil
	}
	for wr := range cli.Watch(ctx, key, clientv3.WithRev(resp.Header.Revision+1)) {
		for _, ev := range wr.Events {
			if ev.Type == clientv3.EventTypePut {
				return nil
			}
		}
	}
	return ctx.Err()
}

// process is a replica process the harness started.
type process struct {
	cmd    *exec.Cmd
	exited chan struct{}
}

// startProcess re-executes this binary as replica name.
func startProcess(endpoint, prefix, name string, o options, stderr io.Writer) (*process, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-endpoint", endpoint, "-prefix", prefix, "-name", name,
		"-objects", fmt.Sprint(o.failoverObjects), "-slots", fmt.Sprint(o.slots),
		"-ttl", o.failoverTTL.String(), "-concurrency", fmt.Sprint(o.concurrency),
		"-drain-timeout", o.drain.String())
	cmd.Env = append(os.Environ(), replicaEnv+"=1")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// kill ends the process with SIGKILL and waits until it is gone.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// terminate stops the process cleanly (SIGTERM), or kills it after 30 s.
func (p *process) terminate() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

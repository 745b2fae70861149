// Command etcdserver is a bare etcd server built from the same
// go.etcd.io/etcd/server/v3 as the client the tests use, so that the
// multi-process tests run a real etcd process without installing one. It
// is test infrastructure: etcdcluster.BuildServer builds it into a test's
// temporary directory.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

func main() {
	var (
		name    = flag.String("name", "m0", "member name")
		dir     = flag.String("data-dir", "", "data directory (required)")
		client  = flag.String("client-url", "", "client URL to listen on and advertise (required)")
		peer    = flag.String("peer-url", "", "peer URL to listen on and advertise (required)")
		initial = flag.String("initial-cluster", "", "name=peer-url,... (default: this member alone)")
		tick    = flag.Uint("tick-ms", 20, "raft heartbeat interval")
		elect   = flag.Uint("election-ms", 200, "raft election timeout")
	)
	flag.Parse()
	if err := run(*name, *dir, *client, *peer, *initial, *tick, *elect); err != nil {
		fmt.Fprintln(os.Stderr, "etcdserver:", err)
		os.Exit(1)
	}
}

func run(name, dir, client, peer, initial string, tick, elect uint) error {
	if dir == "" || client == "" || peer == "" {
		return fmt.Errorf("-data-dir, -client-url and -peer-url are required")
	}
	cu, err := url.Parse(client)
	if err != nil {
		return err
	}
	pu, err := url.Parse(peer)
	if err != nil {
		return err
	}
	if initial == "" {
		initial = name + "=" + peer
	}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = name, dir
	cfg.TickMs, cfg.ElectionMs = tick, elect
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = initial
	cfg.InitialClusterToken = "converge-test"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		return err
	case <-sig:
		return nil
	}
	select {
	case err := <-e.Err():
		return err
	case <-sig:
		return nil
	}
}

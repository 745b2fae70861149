package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// etcdServer is one etcd member embedded in the harness process, on
// 127.0.0.1 ports picked at random, with its data in a temporary directory.
// It keeps etcd's default tick (100 ms) and election timeout (1 s), so
// leases expire as they would in production; only fsync is off.
type etcdServer struct {
	e   *embed.Etcd
	dir string
}

func startEtcd() (*etcdServer, error) {
	dir, err := os.MkdirTemp("", "converge-replicas-etcd-")
	if err != nil {
		return nil, err
	}
	clientURL, err := freeURL()
	if err != nil {
		return nil, err
	}
	peerURL, err := freeURL()
	if err != nil {
		return nil, err
	}
	cfg := embed.NewConfig()
	cfg.Name = "bench"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = cfg.ListenClientUrls
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = cfg.ListenPeerUrls
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.Logger = "zap"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// A benchmark does not survive power loss; fsync would only measure
	// the disk.
	cfg.UnsafeNoFsync = true
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("etcd: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("etcd not ready after 30s")
	}
	return &etcdServer{e: e, dir: dir}, nil
}

// endpoint is the server's client URL.
func (s *etcdServer) endpoint() string { return s.e.Config().ListenClientUrls[0].String() }

func (s *etcdServer) stop() {
	s.e.Close()
	os.RemoveAll(s.dir)
}

// revision returns etcd's current revision: every write (a put, a delete,
// a transaction that wrote) adds one; lease grants and keepalives do not.
func (s *etcdServer) revision(ctx context.Context, cli *clientv3.Client) (int64, error) {
	st, err := cli.Status(ctx, s.endpoint())
	if err != nil {
		return 0, err
	}
	return st.Header.Revision, nil
}

func freeURL() (url.URL, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return url.URL{}, err
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}, nil
}

// newClient returns a client of endpoint that logs nothing.
func newClient(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"flag"
	"log/slog"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cilium/hive/hivetest"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"golang.org/x/crypto/bcrypt"

	"github.com/converge-go/converge/etcd/internal/freeport"
)

// pki is a test's certificates: a CA that signed the server's and the
// client's, and another CA that signed nothing of theirs.
type pki struct {
	ca, otherCA                            string
	serverCert, serverKey                  string
	clientCert, clientKey, otherClientCert string
	otherClientKey                         string
}

func newPKI(t *testing.T) pki {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	serial := int64(0)
	issue := func(name string, tmpl *x509.Certificate, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		if parent == nil {
			parent, parentKey = tmpl, key
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		kder, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		return cert, key, write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	caTmpl := func(cn string) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	}
	leaf := func(cn string, usage x509.ExtKeyUsage) *x509.Certificate {
		return &x509.Certificate{Subject: pkix.Name{CommonName: cn}, KeyUsage: x509.KeyUsageDigitalSignature,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	}
	var p pki
	ca, caKey, caFile, _ := issue("ca", caTmpl("test CA"), nil, nil)
	other, otherKey, otherFile, _ := issue("other-ca", caTmpl("another CA"), nil, nil)
	p.ca, p.otherCA = caFile, otherFile
	_, _, p.serverCert, p.serverKey = issue("server", leaf("etcd", x509.ExtKeyUsageServerAuth), ca, caKey)
	// The client certificate's name is no etcd user: it proves the
	// client, the user and password say who it is.
	_, _, p.clientCert, p.clientKey = issue("client", leaf("fleet-client", x509.ExtKeyUsageClientAuth), ca, caKey)
	_, _, p.otherClientCert, p.otherClientKey = issue("other-client", leaf("fleet-client", x509.ExtKeyUsageClientAuth), other, otherKey)
	return p
}

// startSecureEtcd starts an embedded etcd that requires a client
// certificate signed by p's CA, with authentication on: user "fleet"
// (password "fleet-pw") may read and write /fleet. It returns the https
// endpoint.
func startSecureEtcd(t *testing.T, p pki) string {
	t.Helper()
	clientURL := url.URL{Scheme: "https", Host: freeport.Addr(t)}
	peerURL := url.URL{Scheme: "http", Host: freeport.Addr(t)}
	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = "secure", t.TempDir()
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo = transport.TLSInfo{CertFile: p.serverCert, KeyFile: p.serverKey, TrustedCAFile: p.ca, ClientCertAuth: true}
	// The refusals this test provokes are logged as errors, with stacks.
	cfg.LogLevel, cfg.LogOutputs = "fatal", []string{"stderr"}
	cfg.UnsafeNoFsync, cfg.TickMs, cfg.ElectionMs = true, 10, 100
	// Passwords are checked with bcrypt: the cheapest cost keeps each
	// authentication fast on a loaded machine.
	cfg.BcryptCost = uint(bcrypt.MinCost)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("etcd not ready after 30s")
	}
	endpoint := clientURL.String()

	admin := tlsClient(t, endpoint, p, "", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, step := range []func() error{
		func() error { _, err := admin.UserAdd(ctx, "root", "root-pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "root", "root"); return err },
		func() error { _, err := admin.RoleAdd(ctx, "fleet"); return err },
		func() error {
			_, err := admin.RoleGrantPermission(ctx, "fleet", "/fleet", clientv3.GetPrefixRangeEnd("/fleet"), clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		},
		func() error { _, err := admin.UserAdd(ctx, "fleet", "fleet-pw"); return err },
		func() error { _, err := admin.UserGrantRole(ctx, "fleet", "fleet"); return err },
		func() error { _, err := admin.AuthEnable(ctx); return err },
	} {
		if err := step(); err != nil {
			t.Fatalf("etcd auth setup: %v", err)
		}
	}
	return endpoint
}

// tlsClient is a client of endpoint with p's client certificate, as user
// (if any), closed when the test ends.
func tlsClient(t *testing.T, endpoint string, p pki, user, password string) *clientv3.Client {
	t.Helper()
	c := &clientFlags{cacert: p.ca, cert: p.clientCert, key: p.clientKey}
	tlsCfg, err := c.tls()
	if err != nil {
		t.Fatal(err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, TLS: tlsCfg, DialTimeout: 5 * time.Second,
		Username: user, Password: password, Logger: zapNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// dialWith parses args and env as the fleet's command line and
// environment, and connects.
func dialWith(t *testing.T, args []string, env map[string]string) (*clientv3.Client, error) {
	t.Helper()
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	var o options
	c := commonFlags(fs, &o)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.config(func(k string) string { return env[k] })
	if err != nil {
		return nil, err
	}
	cli, err := connect(t.Context(), cfg, o.prefix, func(err error) { t.Fatalf("only a warning: %v", err) })
	if err == nil {
		t.Cleanup(func() { cli.Close() })
	}
	return cli, err
}

// Finding 4: the fleet reaches an etcd that requires client certificates
// and a user, with etcdctl's flags or its environment variables; without
// them, or with the wrong ones, it is refused, with an error that says
// what TLS found wrong instead of "context deadline exceeded".
func TestFleetWithTLSAndAuth(t *testing.T) {
	p := newPKI(t)
	endpoint := startSecureEtcd(t, p)
	dir := t.TempDir()
	pwFile, wrongPW := filepath.Join(dir, "pw"), filepath.Join(dir, "wrong")
	if err := os.WriteFile(pwFile, []byte("fleet-pw\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(wrongPW, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	plain := "http" + strings.TrimPrefix(endpoint, "https")
	certs := []string{"--endpoints", endpoint, "--cacert", p.ca, "--cert", p.clientCert, "--key", p.clientKey}
	for _, tc := range []struct {
		name string
		args []string
		env  map[string]string
		want []string
	}{
		{"http to a TLS server", []string{"--endpoints", plain}, nil, []string{"TLS", "speaks TLS", "https://"}},
		{"no CA", []string{"--endpoints", endpoint}, nil, []string{"TLS handshake", "--cacert"}},
		{"another CA", []string{"--endpoints", endpoint, "--cacert", p.otherCA}, nil, []string{"TLS handshake", "unknown authority"}},
		{"no client certificate", []string{"--endpoints", endpoint, "--cacert", p.ca}, nil, []string{"TLS handshake", "--cert and --key"}},
		{"a client certificate of another CA", []string{"--endpoints", endpoint, "--cacert", p.ca, "--cert", p.otherClientCert, "--key", p.otherClientKey},
			nil, []string{"TLS handshake"}},
		{"no user", certs, nil, []string{"etcdserver:"}},
		{"wrong password", append(certs, "--user", "fleet", "--password-file", wrongPW), nil, []string{"authentication failed"}},
		{"password on the command line", append(certs, "--user", "fleet:fleet-pw"), nil, []string{"visible to every user"}},
		{"user without password", append(certs, "--user", "fleet"), nil, []string{"no password"}},
		{"TLS flags with http", []string{"--endpoints", plain, "--cacert", p.ca}, nil, []string{"must be https://"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A refusal at the TLS layer shows only as the dial timing
			// out: keep that short.
			_, err := dialWith(t, append([]string{"--dial-timeout", "2s"}, tc.args...), tc.env)
			if err == nil {
				t.Fatal("connected")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not say %q", err, w)
				}
			}
		})
	}

	env := map[string]string{"ETCDCTL_ENDPOINTS": endpoint, "ETCDCTL_CACERT": p.ca, "ETCDCTL_CERT": p.clientCert,
		"ETCDCTL_KEY": p.clientKey, "ETCDCTL_USER": "fleet", "ETCDCTL_PASSWORD": "fleet-pw"}
	for name, in := range map[string]struct {
		args []string
		env  map[string]string
	}{
		"flags":                      {append(certs, "--user", "fleet", "--password-file", pwFile), nil},
		"environment":                {nil, env},
		"name:password from ETCDCTL": {nil, map[string]string{"ETCDCTL_ENDPOINTS": endpoint, "ETCDCTL_CACERT": p.ca, "ETCDCTL_CERT": p.clientCert, "ETCDCTL_KEY": p.clientKey, "ETCDCTL_USER": "fleet:fleet-pw"}},
		"flags over environment":     {[]string{"--cacert", p.ca}, map[string]string{"ETCDCTL_ENDPOINTS": endpoint, "ETCDCTL_CACERT": p.otherCA, "ETCDCTL_CERT": p.clientCert, "ETCDCTL_KEY": p.clientKey, "ETCDCTL_USER": "fleet", "ETCDCTL_PASSWORD": "fleet-pw"}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := dialWith(t, in.args, in.env); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("a replica applies a group", func(t *testing.T) {
		cli, err := dialWith(t, append(certs, "--user", "fleet", "--password-file", pwFile), nil)
		if err != nil {
			t.Fatal(err)
		}
		runReplica(t, cli)
	})
}

// runReplica runs one replica of the fleet on cli, desires a group and
// waits until the replica has applied it.
func runReplica(t *testing.T, cli *clientv3.Client) {
	t.Helper()
	o := options{name: "r1", prefix: "/fleet", slots: 4, ttl: 5 * time.Second, concurrency: 4,
		callTime: time.Millisecond, opTimeout: 10 * time.Second, summaryEvery: 100 * time.Millisecond}
	h := newHive(o, cli)
	log := hivetest.Logger(t, hivetest.LogLevel(slog.LevelWarn))
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	if err := h.Start(log, ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := h.Stop(log, context.Background()); err != nil {
			t.Error(err)
		}
	}()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	applied := cli.Watch(wctx, "/fleet/target/web")
	if _, err := cli.Put(ctx, "/fleet/desired/web", `{"size": 2, "image": "web:1"}`); err != nil {
		t.Fatal(err)
	}
	for resp := range applied {
		for _, ev := range resp.Events {
			if strings.Contains(string(ev.Kv.Value), "web:1") {
				return
			}
		}
	}
	t.Fatalf("the group was not applied: %v", ctx.Err())
}

// An etcd that does not answer yet is no reason not to start: the client
// retries, as it did before the start check; only TLS problems and
// refusals of the user stop a replica.
func TestUnreachableEtcdOnlyWarns(t *testing.T) {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	var o options
	c := commonFlags(fs, &o)
	if err := fs.Parse([]string{"--endpoints", "http://" + freeport.Addr(t), "--dial-timeout", "200ms"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := c.config(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	var warned error
	cli, err := connect(t.Context(), cfg, o.prefix, func(err error) { warned = err })
	if err != nil || cli == nil || warned == nil {
		t.Fatalf("client %v, error %v, warning %v", cli, err, warned)
	}
	cli.Close()
}

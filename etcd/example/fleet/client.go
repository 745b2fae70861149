package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// clientFlags are the etcd client's settings, spelled as etcdctl spells
// them, so that an operator's etcdctl setup works as it is: the flags,
// or else the ETCDCTL_* variables of the same names.
type clientFlags struct {
	fs           *flag.FlagSet
	endpoints    string
	cacert       string
	cert, key    string
	user         string
	userFromEnv  bool // ETCDCTL_USER, which may hold the password
	passwordFile string
	dialTimeout  time.Duration
	// insecureCredentials lets a user and password go to an endpoint that
	// is not TLS (http://), where anyone on the path reads them.
	insecureCredentials bool
}

// addClientFlags adds the etcd client's flags to fs.
func addClientFlags(fs *flag.FlagSet) *clientFlags {
	c := &clientFlags{fs: fs}
	fs.StringVar(&c.endpoints, "endpoints", "http://127.0.0.1:2379",
		"etcd client URLs, comma-separated (https:// for TLS); env ETCDCTL_ENDPOINTS")
	fs.StringVar(&c.cacert, "cacert", "", "verify the etcd server's certificate with this CA bundle (PEM); env ETCDCTL_CACERT")
	fs.StringVar(&c.cert, "cert", "", "client certificate (PEM) for etcd's client-cert-auth; env ETCDCTL_CERT")
	fs.StringVar(&c.key, "key", "", "the client certificate's key (PEM); env ETCDCTL_KEY")
	fs.StringVar(&c.user, "user", "", "etcd user name (the password from --password-file or ETCDCTL_PASSWORD); env ETCDCTL_USER, which may be name:password")
	fs.StringVar(&c.passwordFile, "password-file", "", "file holding the etcd user's password (a trailing newline is dropped)")
	fs.BoolVar(&c.insecureCredentials, "insecure-credentials", false,
		"send --user's password to endpoints that are not https:// (by default refused: anyone on the path reads it)")
	fs.DurationVar(&c.dialTimeout, "dial-timeout", 5*time.Second, "how long to wait for etcd at start; env ETCDCTL_DIAL_TIMEOUT")
	return c
}

// fromEnv fills the settings whose flag was not given from etcdctl's
// environment variables.
func (c *clientFlags) fromEnv(getenv func(string) string) {
	set := map[string]bool{}
	c.fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for flagName, v := range map[string]*string{"endpoints": &c.endpoints, "cacert": &c.cacert, "cert": &c.cert, "key": &c.key, "user": &c.user} {
		if env := getenv("ETCDCTL_" + strings.ToUpper(flagName)); env != "" && !set[flagName] {
			*v = env
			c.userFromEnv = c.userFromEnv || flagName == "user"
		}
	}
	if env := getenv("ETCDCTL_DIAL_TIMEOUT"); env != "" && !set["dial-timeout"] {
		if d, err := time.ParseDuration(env); err == nil {
			c.dialTimeout = d
		}
	}
}

// config returns the client configuration the settings describe, reading
// the CA, the certificate and the password. A password given on the
// command line (--user name:password) is refused: every local user can
// read a process's command line.
func (c *clientFlags) config(getenv func(string) string) (clientv3.Config, error) {
	c.fromEnv(getenv)
	cfg := clientv3.Config{
		Endpoints:   strings.Split(c.endpoints, ","),
		DialTimeout: c.dialTimeout,
		// gRPC pings a connection at most every 10 s, so a member that
		// stops answering without closing its connections (a partition)
		// is noticed late by the client itself: the leases' own probes
		// (they try the other members) keep this replica's lease, and
		// OperationTimeout bounds an operation stuck on that member.
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: 2 * time.Second,
		Logger: zapNop(),
	}
	if err := c.auth(&cfg, getenv); err != nil {
		return cfg, err
	}
	if err := c.credentialsOverTLS(cfg); err != nil {
		return cfg, err
	}
	tlsCfg, err := c.tls()
	if err != nil || tlsCfg == nil {
		return cfg, err
	}
	for _, ep := range cfg.Endpoints {
		if !strings.HasPrefix(ep, "https://") && !strings.HasPrefix(ep, "unixs://") {
			return cfg, fmt.Errorf("--cacert, --cert and --key are for TLS: endpoint %s must be https://", ep)
		}
	}
	cfg.TLS = tlsCfg
	return cfg, nil
}

// auth sets the user and password.
func (c *clientFlags) auth(cfg *clientv3.Config, getenv func(string) string) error {
	if c.user == "" {
		return nil
	}
	name, password, inline := strings.Cut(c.user, ":")
	if inline && !c.userFromEnv {
		return errors.New("--user: a password on the command line is visible to every user of the host (ps); " +
			"give the name alone, and the password in --password-file or ETCDCTL_PASSWORD")
	}
	switch {
	case inline:
	case c.passwordFile != "":
		b, err := os.ReadFile(c.passwordFile)
		if err != nil {
			return fmt.Errorf("--password-file: %w", err)
		}
		password = strings.TrimRight(string(b), "\r\n")
	case getenv("ETCDCTL_PASSWORD") != "":
		password = getenv("ETCDCTL_PASSWORD")
	default:
		return fmt.Errorf("--user %s: no password: give --password-file or ETCDCTL_PASSWORD", name)
	}
	cfg.Username, cfg.Password = name, password
	return nil
}

// credentialsOverTLS refuses a user and password for an endpoint that
// would carry them in clear (http://, or no scheme, which etcd's client
// takes as http://), unless --insecure-credentials says so. A unix
// socket stays on the host, and is allowed.
func (c *clientFlags) credentialsOverTLS(cfg clientv3.Config) error {
	if cfg.Username == "" || c.insecureCredentials {
		return nil
	}
	for _, ep := range cfg.Endpoints {
		if !strings.HasPrefix(ep, "https://") && !strings.HasPrefix(ep, "unixs://") && !strings.HasPrefix(ep, "unix://") {
			return fmt.Errorf("--user: endpoint %s is not https://, and would carry the password in clear: "+
				"use https:// (with --cacert), or give --insecure-credentials", ep)
		}
	}
	return nil
}

// tls returns the TLS configuration, or nil when no TLS setting is given.
func (c *clientFlags) tls() (*tls.Config, error) {
	if c.cacert == "" && c.cert == "" && c.key == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.cacert != "" {
		pem, err := os.ReadFile(c.cacert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert %s: no PEM certificate in it", c.cacert)
		}
	}
	if (c.cert == "") != (c.key == "") {
		return nil, errors.New("--cert and --key go together")
	}
	if c.cert != "" {
		pair, err := tls.LoadX509KeyPair(c.cert, c.key)
		if err != nil {
			return nil, fmt.Errorf("--cert, --key: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// connect returns a client of cfg, and checks that etcd answers a read of
// prefix through it, so that a replica that cannot use etcd says why at
// once: a TLS problem (see diagnose; the client alone says only "context
// deadline exceeded") or a refusal of the user fails; an etcd that is
// only unreachable for now is reported to warn, and the client is
// returned, to retry as it always does.
func connect(ctx context.Context, cfg clientv3.Config, prefix string, warn func(error)) (*clientv3.Client, error) {
	endpoints := strings.Join(cfg.Endpoints, ",")
	cli, err := clientv3.New(cfg)
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
		_, err = cli.Get(rctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		cancel()
		if err == nil {
			return cli, nil
		}
	}
	if d := diagnose(ctx, cfg); d != nil {
		err = d
	} else if cli != nil && !refused(err) {
		warn(fmt.Errorf("etcd %s: %w", endpoints, err))
		return cli, nil
	}
	if cli != nil {
		cli.Close()
	}
	return nil, fmt.Errorf("etcd %s: %w", endpoints, err)
}

// refused reports whether err is etcd refusing the client's user or
// permissions, which waiting does not fix.
func refused(err error) bool {
	for _, e := range []error{rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound, rpctypes.ErrAuthFailed,
		rpctypes.ErrPermissionDenied, rpctypes.ErrInvalidAuthToken, rpctypes.ErrAuthOldRevision} {
		if errors.Is(err, e) {
			return true
		}
	}
	switch status.Code(err) {
	case codes.Unauthenticated, codes.PermissionDenied:
		return true
	}
	return false
}

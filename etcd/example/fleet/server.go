package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/cilium/hive/cell"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/converge-go/converge/etcd/shard"
	"github.com/converge-go/converge/internal/hostcheck"
	"github.com/converge-go/converge/reconciler"
)

// registerServer serves, when options.httpAddr is set:
//
//	GET /view    the cluster-wide view (shard.ViewHandler): 200 when the
//	             whole desired set is Done, 503 otherwise
//	GET /status  this replica's reconciler status (reconciler.StatusSnapshot)
func registerServer(lc cell.Lifecycle, cli *clientv3.Client, o options, rep *reporter) {
	if o.httpAddr == "" {
		return
	}
	// Every stage of a request is bounded: a slow or idle client cannot
	// hold connections for ever.
	srv := &http.Server{Handler: apiHandler(cli, o, rep), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	lc.Append(cell.Hook{
		OnStart: func(cell.HookContext) error {
			l, err := net.Listen("tcp", o.httpAddr)
			if err != nil {
				return fmt.Errorf("http: %w", err)
			}
			go func() { _ = srv.Serve(l) }()
			return nil
		},
		OnStop: func(ctx cell.HookContext) error { return srv.Shutdown(ctx) },
	})
}

// apiHandler serves /view and /status, under the Host rule of the other
// examples (hostcheck: 421 for a name other than localhost), so that a
// page rebinding its DNS name to this address cannot read them from a
// browser on the host.
func apiHandler(cli *clientv3.Client, o options, rep *reporter) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /view", viewHandler(cli, o))
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		p := rep.rec.Load()
		if p == nil {
			http.Error(w, "not started", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode((*p).Status())
	})
	return hostcheck.Handler(mux)
}

// viewHandler is shard.ViewHandler of the fleet's view (viewPrefix), in
// either mode.
func viewHandler(cli *clientv3.Client, o options) http.Handler {
	return shard.ViewHandler(cli, viewPrefix(o), o.prefix+"/desired/")
}

// printView prints the view of the fleet at o.prefix to w and reports
// whether the whole desired set is Done.
func printView(ctx context.Context, w io.Writer, cli *clientv3.Client, o options, asJSON bool) (bool, error) {
	v, err := shard.ReadView(ctx, cli, viewPrefix(o), o.prefix+"/desired/")
	if err != nil {
		return false, err
	}
	if asJSON {
		return v.Done, json.NewEncoder(w).Encode(v)
	}
	fmt.Fprintf(w, "slots:   %d claimed of %d", v.Claimed, v.Slots)
	if len(v.Unowned) > 0 || len(v.Moving) > 0 {
		fmt.Fprintf(w, " (unowned %v, moving %v)", v.Unowned, v.Moving)
	}
	fmt.Fprintln(w)
	for _, s := range v.Replicas {
		fmt.Fprintf(w, "replica: %-12s %3d slots  ", s.Name, len(s.Slots))
		printCounts(w, s.Report)
	}
	fmt.Fprintf(w, "total:   %s\n", counts(v.Objects))
	fmt.Fprintf(w, "covered: %v (at revision %d)\n", v.Covered, v.Revision)
	fmt.Fprintf(w, "done:    %v\n", v.Done)
	return v.Done, nil
}

func printCounts(w io.Writer, r shard.Report) {
	fmt.Fprintf(w, "%s, %d in flight, %d retries\n", counts(r.Objects), r.InFlight, r.Retries)
}

func counts(c reconciler.ObjectCounts) string {
	return fmt.Sprintf("%d done, %d pending, %d refreshing, %d error", c.Done, c.Pending, c.Refreshing, c.Error)
}

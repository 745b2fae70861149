package netroute

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Applier changes routes in the kernel: Replace installs or replaces each
// route, Delete deletes each; errs[i] gets route i's error. Conn applies
// a chunk per system call; PerRoute one request per route.
type Applier interface {
	Replace(ctx context.Context, routes []*netlink.Route, errs []error)
	Delete(ctx context.Context, routes []*netlink.Route, errs []error)
}

var (
	_ Applier = (*Conn)(nil)
	_ Applier = PerRoute{}
)

// PerRoute applies routes one netlink request at a time with
// netlink.Handle's RouteReplace and RouteDel, as a program using the
// netlink library directly does.
type PerRoute struct{ Handle *netlink.Handle }

// Replace implements Applier.
func (p PerRoute) Replace(ctx context.Context, routes []*netlink.Route, errs []error) {
	for i, r := range routes {
		if errs[i] = ctx.Err(); errs[i] == nil {
			errs[i] = p.Handle.RouteReplace(r)
		}
	}
}

// Delete implements Applier.
func (p PerRoute) Delete(ctx context.Context, routes []*netlink.Route, errs []error) {
	for i, r := range routes {
		if errs[i] = ctx.Err(); errs[i] == nil {
			errs[i] = p.Handle.RouteDel(r)
		}
	}
}

// maxSyncErrors is how many errors Sync reports; the count says the rest.
const maxSyncErrors = 5

// SyncResult says what Sync changed.
type SyncResult struct {
	Repaired int // desired routes put back or corrected
	Removed  int // owned routes nobody desires, deleted
}

// Sync makes the owned routes in the kernel match want (keyed by Key):
// it deletes the owned routes that no entry of want has, and replaces the
// wanted routes that are missing or differ (see Diff), but only those
// for which repair returns true: a caller leaves out the routes it is
// still working on itself. list returns the owned routes in the kernel
// (Conn.List, or Owner.List over a handle); apply changes them. A route
// already gone when it is deleted is fine.
func Sync(ctx context.Context, list func() ([]netlink.Route, error), want map[netip.Prefix]*netlink.Route,
	repair func(netip.Prefix) bool, apply Applier) (SyncResult, error) {
	have, err := list()
	if err != nil {
		return SyncResult{}, fmt.Errorf("list routes: %w", err)
	}
	replace, remove := Diff(have, want)
	n := 0
	for _, r := range replace {
		if repair(Key(r)) {
			replace[n] = r
			n++
		}
	}
	replace = replace[:n]

	var errs []error
	count := func(verb string, routes []*netlink.Route, results []error) int {
		done := 0
		for i, err := range results {
			switch {
			case err == nil || (verb == "delete" && errors.Is(err, unix.ESRCH)):
				done++
			case len(errs) < maxSyncErrors:
				errs = append(errs, fmt.Errorf("%s %s: %w", verb, Key(routes[i]), err))
			}
		}
		if failed := len(routes) - done; failed > maxSyncErrors {
			errs = append(errs, fmt.Errorf("%d of %d routes failed to %s", failed, len(routes), verb))
		}
		return done
	}
	var res SyncResult
	results := make([]error, max(len(remove), len(replace)))
	apply.Delete(ctx, remove, results[:len(remove)])
	res.Removed = count("delete", remove, results[:len(remove)])
	apply.Replace(ctx, replace, results[:len(replace)])
	res.Repaired = count("replace", replace, results[:len(replace)])
	return res, errors.Join(errs...)
}

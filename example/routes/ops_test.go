package main

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/converge-go/converge/reconciler"
)

// The kernel's refusals that retrying cannot fix are Permanent and say
// why; the rest are retried.
func TestKernelError(t *testing.T) {
	r := &Route{RouteSpec: RouteSpec{Prefix: "10.1.0.0/24", Gateway: "203.0.113.1", Device: "eth9"}}
	for _, c := range []struct {
		err       error
		permanent bool
		want      string
	}{
		{unix.ENETUNREACH, true, "gateway 203.0.113.1 unreachable"},
		{fmt.Errorf("%w: Nexthop has invalid gateway", unix.EHOSTUNREACH), true, "Nexthop has invalid gateway"},
		{unix.ENODEV, true, `device "eth9" is gone`},
		{unix.EINVAL, true, "the kernel refused the route"},
		{unix.ENOBUFS, false, "no buffer space"},
		{unix.EBUSY, false, "busy"},
		{errors.New("netlink: no answer from the kernel"), false, "no answer"},
	} {
		err := kernelError(r, c.err)
		if reconciler.IsPermanent(err) != c.permanent || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v (permanent %v), want permanent %v containing %q",
				c.err, err, reconciler.IsPermanent(err), c.permanent, c.want)
		}
		if !errors.Is(err, c.err) {
			t.Errorf("%v: %v does not wrap it", c.err, err)
		}
	}
	if kernelError(r, nil) != nil || deleteError(unix.ESRCH) != nil || deleteError(unix.EBUSY) == nil {
		t.Error("nil, or a delete of a route that is gone, is not a success")
	}
}

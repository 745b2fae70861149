package shard

import (
	"context"
	"sync"
	"time"
)

// viewReadTimeout bounds one read of a view that ViewHandler makes for
// every request waiting on it: it does not end with the request that
// started it.
const viewReadTimeout = 30 * time.Second

// flight runs one read of a view at a time for any number of requests.
// A request shares the read that starts after it came, never one already
// in progress then: that one may have read etcd before the change the
// request is asking about (a deploy gate that wrote the desired state and
// now polls for Done).
type flight struct {
	mu  sync.Mutex
	cur *flightCall // the read in progress, or nil
}

type flightCall struct {
	done chan struct{}
	v    View
	err  error
}

// do returns the result of a read that started after do was called:
// the one in progress when it is newer than the call, else a new one
// once the one in progress has ended.
func (f *flight) do(ctx context.Context, read func(context.Context) (View, error)) (View, error) {
	f.mu.Lock()
	stale := f.cur
	for {
		c := f.cur
		if c == nil {
			c = &flightCall{done: make(chan struct{})}
			f.cur = c
			f.mu.Unlock()
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), viewReadTimeout)
			c.v, c.err = read(rctx)
			cancel()
			f.mu.Lock()
			f.cur = nil
			f.mu.Unlock()
			close(c.done)
			return c.v, c.err
		}
		f.mu.Unlock()
		select {
		case <-c.done:
		case <-ctx.Done():
			return View{}, ctx.Err()
		}
		if c != stale {
			return c.v, c.err
		}
		f.mu.Lock()
	}
}

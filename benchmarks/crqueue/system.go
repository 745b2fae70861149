package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"

	"github.com/converge-go/converge/benchmarks/internal/bench"
	"github.com/converge-go/converge/benchmarks/internal/waitorder"
)

// crSystem is controller-runtime's priority queue with workers, as a
// controller uses it: an event adds the object's key (at the object's
// priority: an initial list at LowPriority), Concurrency workers take
// keys (MaxConcurrentReconciles), reconcile the object as the cache holds
// it then, and on success Forget and Done the key; on failure the key is
// added again rate-limited, with the same exponential backoff as the
// other sides. The cache is a map of objects with a revision each, as a
// table's: a change and a Done both move it, and a result is recorded
// only if the object did not change while it was reconciled (otherwise
// the queue holds the new event and hands the key out again).
type crSystem struct {
	setup waitorder.Setup
	q     priorityqueue.PriorityQueue[uint64]

	ctx     context.Context
	cancel  context.CancelFunc
	workers sync.WaitGroup

	mu      sync.Mutex
	objs    map[uint64]*crObject
	pending int           // objects not Done at their revision
	idle    chan struct{} // closed while pending is 0
}

// crObject is one object of the cache.
type crObject struct {
	rev   uint64
	done  bool
	watch chan struct{} // closed when the object is next marked Done
}

// newCR builds a crSystem. The priority queue has no fairness key and no
// per-target cap: a Setup that asks for them is an error.
func newCR(_ context.Context, s waitorder.Setup) (waitorder.System, error) {
	if s.Order.FairnessKey != nil || s.Order.TargetKey != nil {
		return nil, errors.New("controller-runtime's priority queue has no fairness key and no per-target cap")
	}
	sys := &crSystem{setup: s, objs: map[uint64]*crObject{}, idle: make(chan struct{})}
	close(sys.idle)
	for id := range uint64(s.Preload) {
		sys.objs[id] = &crObject{rev: 1, done: true, watch: make(chan struct{})}
	}
	return sys, nil
}

func (s *crSystem) Start(context.Context) error {
	// An empty name: no metrics, as every side here runs without.
	s.q = priorityqueue.New("", func(o *priorityqueue.Opts[uint64]) {
		o.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[uint64](bench.RetryBackoffMin, bench.RetryBackoffMax)
	})
	s.ctx, s.cancel = context.WithCancel(context.Background())
	for range max(s.setup.Concurrency, 1) {
		s.workers.Go(s.work)
	}
	return nil
}

func (s *crSystem) Stop() error {
	s.cancel()
	s.q.ShutDown()
	s.workers.Wait()
	return nil
}

// add adds keys to the queue at priority.
func (s *crSystem) add(priority int, keys ...uint64) {
	s.q.AddWithOpts(priorityqueue.AddOpts{Priority: &priority}, keys...)
}

// priority is object id's priority: the Order's, or the queue's default.
func (s *crSystem) priority(id uint64) int {
	if s.setup.Order.Priority == nil {
		return 0
	}
	return s.setup.Order.Priority(id)
}

// markPending notes that an object is no longer Done; s.mu is held.
func (s *crSystem) markPending() {
	if s.pending == 0 {
		s.idle = make(chan struct{})
	}
	s.pending++
}

func (s *crSystem) Insert(from, to int) {
	keys := make([]uint64, 0, to-from)
	s.mu.Lock()
	for id := uint64(from); id < uint64(to); id++ {
		if _, ok := s.objs[id]; ok {
			panic(fmt.Sprintf("insert: object %d exists", id))
		}
		s.objs[id] = &crObject{rev: 1, watch: make(chan struct{})}
		s.markPending()
		keys = append(keys, id)
	}
	s.mu.Unlock()
	// Runs of equal priority, one Add each.
	for len(keys) > 0 {
		p, n := s.priority(keys[0]), 1
		for n < len(keys) && s.priority(keys[n]) == p {
			n++
		}
		s.add(p, keys[:n]...)
		keys = keys[n:]
	}
}

// InsertDone adds objects [from, to) to the cache, Done, and nothing to
// the queue: a controller whose cache fills with objects it has nothing
// to do for.
func (s *crSystem) InsertDone(from, to int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id := uint64(from); id < uint64(to); id++ {
		if _, ok := s.objs[id]; ok {
			panic(fmt.Sprintf("insert: object %d exists", id))
		}
		s.objs[id] = &crObject{rev: 1, done: true, watch: make(chan struct{})}
	}
}

func (s *crSystem) Touch(id int) (uint64, time.Time) {
	key := uint64(id)
	s.mu.Lock()
	o, ok := s.objs[key]
	if !ok {
		panic(fmt.Sprintf("touch: object %d not in the cache", id))
	}
	if o.done {
		o.done = false
		s.markPending()
	}
	o.rev++
	rev := o.rev
	s.mu.Unlock()
	at := time.Now()
	s.add(s.priority(key), key)
	return rev, at
}

func (s *crSystem) WaitDone(ctx context.Context, id int, after uint64) error {
	for {
		s.mu.Lock()
		o := s.objs[uint64(id)]
		if o != nil && o.done && o.rev > after {
			s.mu.Unlock()
			return nil
		}
		var watch chan struct{}
		if o != nil {
			watch = o.watch
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
			return fmt.Errorf("object %d not Done: %w", id, ctx.Err())
		case <-watch:
		}
	}
}

func (s *crSystem) WaitAll(ctx context.Context) error {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-idle:
		return nil
	}
}

// work is one worker: it takes keys until the queue shuts down.
func (s *crSystem) work() {
	for {
		key, _, shutdown := s.q.GetWithPriority()
		if shutdown {
			return
		}
		s.reconcile(key)
	}
}

// reconcile applies the object as the cache holds it now, and records
// the result.
func (s *crSystem) reconcile(key uint64) {
	defer s.q.Done(key)
	s.mu.Lock()
	rev := s.objs[key].rev
	s.mu.Unlock()
	ctx, cancel := s.ctx, context.CancelFunc(func() {})
	if s.setup.OperationTimeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, s.setup.OperationTimeout)
	}
	err := s.setup.Target.Update(ctx, key)
	cancel()
	if err != nil {
		s.q.AddRateLimited(key)
		return
	}
	s.q.Forget(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.objs[key]
	if o.rev != rev {
		return // changed meanwhile: the queue has the key again
	}
	o.rev++
	o.done = true
	close(o.watch)
	o.watch = make(chan struct{})
	if s.pending--; s.pending == 0 {
		close(s.idle)
	}
}

package main

import (
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// fleet is a group of in-process replicas over one sleepTarget, fed the
// same desired set, with optional churn: a steady stream of changes to
// random objects, written to every live replica's table as a source would.
type fleet struct {
	cli     *clientv3.Client
	prefix  string
	slots   int
	ttl     time.Duration
	objects int
	conc    int
	summary time.Duration
	drain   time.Duration
	target  *sleepTarget

	mu       sync.Mutex
	replicas map[string]*replica
	done     map[string]*atomic.Int64 // completed operations per replica
	value    uint64                   // the churn's last value
	extra    int                      // see churnOne
	present  map[int]bool             // the extra objects in the tables

	stopChurn chan struct{}
	churnDone chan struct{}
}

func newFleet(cli *clientv3.Client, prefix string, o options, objects int, delay time.Duration) *fleet {
	return &fleet{cli: cli, prefix: prefix, slots: o.slots, ttl: o.ttl, objects: objects, conc: o.concurrency, drain: o.drain,
		target: newSleepTarget(delay), replicas: map[string]*replica{}, done: map[string]*atomic.Int64{}}
}

// add builds replica name, gives it the desired set and starts it.
func (f *fleet) add(name string) error {
	done := &atomic.Int64{}
	r, err := newReplica(replicaConfig{cli: f.cli, prefix: f.prefix, name: name, slots: f.slots, ttl: f.ttl,
		summaryInterval: f.summary, drainTimeout: f.drain, concurrency: f.conc, ops: f.target.forReplica(name, done)})
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	// Under the lock, so that no churn change is missed between the
	// load and the replica joining the churn.
	r.desire(0, f.objects, 0)
	if err := r.start(); err != nil {
		return err
	}
	f.replicas[name] = r
	f.done[name] = done
	return nil
}

// stopped is what a clean stop saw: the operations acquired and not
// released when it began, and those still not released once it returned
// (the reconciler never released them; the slot's drain waited for them
// until shard.Config.DrainTimeout).
type stopped struct{ heldBefore, heldAfter int64 }

// remove stops replica name cleanly: it leaves the churn, then its hive
// stops (the Manager drains its slots and revokes its lease).
func (f *fleet) remove(name string) (stopped, error) {
	f.mu.Lock()
	r := f.replicas[name]
	delete(f.replicas, name)
	f.mu.Unlock()
	if r == nil {
		return stopped{}, nil
	}
	st := stopped{heldBefore: r.held.Load()}
	err := r.stop()
	st.heldAfter = r.held.Load()
	return st, err
}

// startChurn changes perSecond random objects a second, each in every live
// replica's table, until stopAll.
func (f *fleet) startChurn(perSecond int) {
	f.stopChurn, f.churnDone = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(f.churnDone)
		const tick = 10 * time.Millisecond
		perTick := max(1, perSecond/int(time.Second/tick))
		t := time.NewTicker(tick)
		defer t.Stop()
		for {
			select {
			case <-f.stopChurn:
				return
			case <-t.C:
			}
			f.mu.Lock()
			f.value++
			for range perTick {
				f.churnOne()
			}
			f.mu.Unlock()
		}
	}()
}

// churnOne changes one object in every live replica's table; f.mu is held.
// Without extra, it marks a random object Pending with a new value. With
// extra, it adds or removes one of extra objects beyond the desired set,
// so that the replicas' counts of Done objects change.
func (f *fleet) churnOne() {
	if f.extra == 0 {
		i := rand.IntN(f.objects)
		for _, r := range f.replicas {
			r.desire(i, i+1, f.value)
		}
		return
	}
	i := f.objects + rand.IntN(f.extra)
	if f.present == nil {
		f.present = map[int]bool{}
	}
	f.present[i] = !f.present[i]
	for _, r := range f.replicas {
		if f.present[i] {
			r.desire(i, i+1, f.value)
		} else {
			r.forget(i)
		}
	}
}

// waitSettled waits until every live replica has nothing outstanding and
// the replicas' Done counts add up to every object.
func (f *fleet) waitSettled(patience time.Duration) error {
	deadline := time.Now().Add(patience)
	for {
		f.mu.Lock()
		total, all := 0, true
		for _, r := range f.replicas {
			done, ok := r.settled()
			total += done
			all = all && ok
		}
		f.mu.Unlock()
		if all && total == f.objects {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.New("replicas not settled: " + itoaSum(total, f.objects))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func itoaSum(done, want int) string {
	return num(float64(done)) + " of " + num(float64(want)) + " objects Done"
}

// completed returns the completed operations of each live replica.
func (f *fleet) completed() map[string]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int64, len(f.done))
	for name, d := range f.done {
		out[name] = d.Load()
	}
	return out
}

// stopAll stops the churn and every replica, and checks the target.
func (f *fleet) stopAll() error {
	if f.stopChurn != nil {
		close(f.stopChurn)
		<-f.churnDone
		f.stopChurn = nil
	}
	f.mu.Lock()
	names := make([]string, 0, len(f.replicas))
	for name := range f.replicas {
		names = append(names, name)
	}
	f.mu.Unlock()
	var errs []error
	for _, name := range names {
		_, err := f.remove(name)
		errs = append(errs, err)
	}
	errs = append(errs, f.target.check())
	return errors.Join(errs...)
}

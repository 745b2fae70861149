package reconciler

import (
	"context"
	"sync/atomic"
)

// The committer is a goroutine that makes a commit's status writes while
// the loop goes on reading and dispatching the next round: with a backlog,
// the write transaction (most of a commit's cost) and the next round's
// reading run side by side instead of one after the other.
//
// It takes up to maxOutJobs jobs at once: one being written and one
// queued behind it, so that it goes from one write transaction straight
// to the next, and finished results never wait on the workers' side,
// where they would take room from the next round. Jobs are written and
// handed back in the order they were sent. The committer touches only a
// job's writes (their outcomes) and the table; the requests stay with the
// loop, in stCommitting, until their job comes back and the loop lands
// it. A request replaced or settled meanwhile is told apart by its attempt
// id (work.writeBack), so a write that comes back late moves nothing on.
type committer[Obj comparable] struct {
	jobs chan *commitJob[Obj] // to the goroutine
	back chan committed[Obj]  // from it
	done chan struct{}        // closed when the goroutine has ended
	// written are the revisions of its writes, published before each
	// commit: the loop, reading changes, tells its own writes apart
	// without computing their keys, landed or not.
	written sharedRanges

	// The loop's: the jobs not out, how many are out, and those that came
	// back and wait to be landed, oldest first.
	spare []*commitJob[Obj]
	out   int
	got   []committed[Obj]
}

// forcePipelined, set by tests only, sends every commit with writes to the
// committer, so that every commit leaves its requests in stCommitting for
// a while and the model test covers what may happen to them meanwhile.
var forcePipelined atomic.Bool

// maxOutJobs is how many commits may be out on the committer at once.
const maxOutJobs = 2

// committed is a job back from the committer: what its write transaction
// wrote, or ok false when it was aborted because the run is stopping.
type committed[Obj comparable] struct {
	job *commitJob[Obj]
	wr  written
	ok  bool
}

// free returns an empty job to build a commit in, or nil when every job
// is out.
func (c *committer[Obj]) free() *commitJob[Obj] {
	if n := len(c.spare); n > 0 {
		job := c.spare[n-1]
		c.spare = c.spare[:n-1]
		return job
	}
	if c.out+len(c.got) < maxOutJobs {
		return &commitJob[Obj]{}
	}
	return nil
}

// release takes back a job the loop is done with, emptied.
func (c *committer[Obj]) release(job *commitJob[Obj]) {
	job.reset()
	c.spare = append(c.spare, job)
}

// send hands job's writes to the goroutine, starting it the first time.
func (c *committer[Obj]) send(ctx context.Context, r *reconciler[Obj], job *commitJob[Obj]) {
	if c.jobs == nil {
		c.jobs = make(chan *commitJob[Obj], maxOutJobs)
		c.back = make(chan committed[Obj], maxOutJobs)
		c.done = make(chan struct{})
		go c.run(ctx, r)
	}
	c.out++
	c.jobs <- job
}

func (c *committer[Obj]) run(ctx context.Context, r *reconciler[Obj]) {
	defer close(c.done)
	for job := range c.jobs {
		wr, ok := r.writeAll(ctx, job.writes, &c.written)
		c.back <- committed[Obj]{job: job, wr: wr, ok: ok}
	}
}

// backCh is the channel the loop waits on while a job is out; nil
// otherwise.
func (c *committer[Obj]) backCh() <-chan committed[Obj] {
	if c.out == 0 {
		return nil
	}
	return c.back
}

// receive keeps a job that came back, for the next commit to land.
func (c *committer[Obj]) receive(b committed[Obj]) {
	c.out--
	c.got = append(c.got, b)
}

// returned hands over the jobs that came back, oldest first, taking in
// any that came back since the loop last looked.
func (c *committer[Obj]) returned() []committed[Obj] {
	for drained := false; c.out > 0 && !drained; {
		select {
		case b := <-c.back:
			c.receive(b)
		default:
			drained = true
		}
	}
	got := c.got
	c.got = c.got[:0] // landed before anything is received again
	return got
}

// ownWrites adds the revisions the committer has written to own.
func (c *committer[Obj]) ownWrites(own *revRanges) {
	if c.jobs != nil {
		c.written.moveTo(own)
	}
}

// busy reports whether a job is out.
func (c *committer[Obj]) busy() bool { return c.out > 0 }

// stop ends the goroutine once its jobs are done (aborted: the run's
// context has ended by then).
func (c *committer[Obj]) stop() {
	if c.jobs == nil {
		return
	}
	close(c.jobs)
	<-c.done
}

// Package pipeline runs one stage of work on a goroutine of its own: jobs
// handed to it are worked on in order and handed back in order, at most a
// fixed number out at once. The reconciler's committer writes a commit's
// statuses this way while its loop reads the next round.
package pipeline

// Stage is the stage. Its owner (one goroutine) calls every method; the
// stage's goroutine touches only the jobs it is handed.
type Stage[J any] struct {
	max        int
	jobs, back chan J
	done       chan struct{}
	out        int // sent and not received back
	got        []J // received back, not yet returned
}

// New returns a stage that has at most max jobs out at once.
func New[J any](max int) *Stage[J] { return &Stage[J]{max: max} }

// Send hands j to the stage, starting its goroutine (which calls work on
// each job) the first time. The caller keeps Pending below max.
func (s *Stage[J]) Send(j J, work func(J)) {
	if s.jobs == nil {
		s.jobs, s.back, s.done = make(chan J, s.max), make(chan J, s.max), make(chan struct{})
		go func() {
			defer close(s.done)
			for j := range s.jobs {
				work(j)
				s.back <- j
			}
		}()
	}
	s.out++
	s.jobs <- j
}

// Back is the channel the owner waits on while a job is out; nil
// otherwise. Receive keeps a job it got there for Returned.
func (s *Stage[J]) Back() <-chan J {
	if s.out == 0 {
		return nil
	}
	return s.back
}

// Receive keeps j, which came back on Back.
func (s *Stage[J]) Receive(j J) {
	s.out--
	s.got = append(s.got, j)
}

// Returned takes in the jobs that came back since, and returns every job
// back and not returned yet, oldest first. The slice is the stage's: done
// with before the next call.
func (s *Stage[J]) Returned() []J {
	for drained := false; s.out > 0 && !drained; {
		select {
		case j := <-s.back:
			s.Receive(j)
		default:
			drained = true
		}
	}
	got := s.got
	s.got = s.got[:0]
	return got
}

// Pending counts the jobs out and those back but not returned yet.
func (s *Stage[J]) Pending() int { return s.out + len(s.got) }

// Out counts the jobs out.
func (s *Stage[J]) Out() int { return s.out }

// Started reports whether the stage's goroutine was started.
func (s *Stage[J]) Started() bool { return s.jobs != nil }

// Stop ends the goroutine once the jobs sent are worked on.
func (s *Stage[J]) Stop() {
	if s.jobs != nil {
		close(s.jobs)
		<-s.done
	}
}

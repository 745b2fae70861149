package pipeline

import (
	"slices"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestStageInOrder: jobs are worked on and come back in the order sent,
// at most max out at once, and Stop waits for the goroutine.
func TestStageInOrder(t *testing.T) {
	s := New[int](2)
	var worked []int
	work := func(j int) { worked = append(worked, j) }
	var back []int
	for j := range 10 {
		if s.Pending() == 2 {
			back = append(back, <-s.Back())
			s.out-- // as Receive, without keeping it
		}
		s.Send(j, work)
	}
	for s.Out() > 0 {
		s.Receive(<-s.Back())
	}
	back = append(back, s.Returned()...)
	s.Stop()
	if want := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}; !slices.Equal(worked, want) || !slices.Equal(back, want) {
		t.Fatalf("worked %v, back %v; want both in order", worked, back)
	}
	if s.Back() != nil || s.Pending() != 0 {
		t.Fatal("jobs left after all came back")
	}
}

package reconciler_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/converge-go/converge/internal/fake"
	"github.com/converge-go/converge/reconciler"
)

// TestSubscriptionDeliversOneKeysOutcomesInOrder: a key that fails twice
// and then succeeds is delivered as failed, retrying, failed, retrying,
// succeeded, with its attempts 1, 2, 2, 3, 3, and the errors; a key given
// up on as failed then given up.
func TestSubscriptionDeliversOneKeysOutcomesInOrder(t *testing.T) {
	f, ctx := startFixture(t, time.Minute)
	sub := reconciler.NewSubscription(0)
	r, err := reconciler.New(observedConfig(f, "sub", sub), f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.target("sub").SetFault("a", fake.Fault{Mode: fake.ModeError, Count: 2})
	f.target("sub").SetFault("p", fake.Fault{Mode: fake.ModePermanent})
	f.load(nil)
	insertPending(f, &testObject{ID: "a", Value: "1"})
	insertPending(f, &testObject{ID: "p", Value: "1"})
	if err := f.waitReconciled(ctx, r, false); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for n := 0; n < 7; n++ {
		select {
		case o := <-sub.Outcomes():
			s := fmt.Sprintf("%s/%d", o.Kind, o.Attempt)
			if (o.Kind == reconciler.OutcomeFailed || o.Kind == reconciler.OutcomeGivenUp) != (o.Err != nil) {
				t.Errorf("%s of %s: error %v", o.Kind, o.Key, o.Err)
			}
			if o.Kind == reconciler.OutcomeFailed && (o.Key == "a") == o.Due.IsZero() {
				t.Errorf("failed %s: due %v", o.Key, o.Due)
			}
			got[o.Key] = append(got[o.Key], s)
		case <-ctx.Done():
			t.Fatalf("only %v delivered", got)
		}
	}
	if want := []string{"failed/1", "retrying/2", "failed/2", "retrying/3", "succeeded/3"}; !slices.Equal(got["a"], want) {
		t.Errorf("a: got %v, want %v", got["a"], want)
	}
	if want := []string{"failed/1", "given-up/1"}; !slices.Equal(got["p"], want) {
		t.Errorf("p: got %v, want %v", got["p"], want)
	}
	if sub.Dropped() != 0 {
		t.Errorf("%d dropped with room to spare", sub.Dropped())
	}
}

// TestSubscriptionDropsWhenTheReaderLags: a subscription nobody reads
// never holds the reconciler up: every object is reconciled, the buffer
// keeps the first outcomes, the rest are dropped, and the drops are
// counted in Dropped and in the metrics.
func TestSubscriptionDropsWhenTheReaderLags(t *testing.T) {
	f, ctx := startFixture(t, time.Minute)
	const buffer, objects = 4, 50
	sub := reconciler.NewSubscription(buffer)
	m := &observerCounts{}
	cfg := observedConfig(f, "sub", sub)
	cfg.Metrics = m
	r, err := reconciler.New(cfg, f.params)
	if err != nil {
		t.Fatal(err)
	}
	f.load(nil)
	for i := range objects {
		insertPending(f, &testObject{ID: fmt.Sprint(i), Value: "1"})
	}
	settleObserved(t, ctx, f, r)
	if got := len(sub.Outcomes()); got != buffer {
		t.Errorf("%d outcomes buffered, want %d", got, buffer)
	}
	if got := sub.Dropped(); got != objects-buffer {
		t.Errorf("Dropped() = %d, want %d", got, objects-buffer)
	}
	if got := m.drops(); got != objects-buffer {
		t.Errorf("metrics counted %d drops, want %d", got, objects-buffer)
	}
	for range buffer {
		if o := <-sub.Outcomes(); o.Kind != reconciler.OutcomeSucceeded {
			t.Errorf("buffered: %+v", o)
		}
	}
}

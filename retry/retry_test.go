package retry

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A request waits a random time up to an exponential bound, capped, or
// longer when the apiserver's Retry-After asks it.
func TestARequestWaitsWithinItsBound(t *testing.T) {
	p := Requests{Timeout: time.Second, Attempts: 5, BaseDelay: 100 * time.Millisecond, MaxDelay: 350 * time.Millisecond}
	for attempt, bound := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 350 * time.Millisecond, 40: 350 * time.Millisecond} {
		for range 200 {
			if d := p.Delay(attempt, 0); d < 0 || d > bound {
				t.Fatalf("attempt %d waits %s, beyond [0, %s]", attempt, d, bound)
			}
		}
	}
	if d := p.Delay(1, 3*time.Second); d != 3*time.Second {
		t.Errorf("with Retry-After 3s the first retry waits %s", d)
	}
}

// The waits of an Event and of a Lease double, up to their bounds.
func TestEventAndLeaseWaitsDoubleUpToTheirBounds(t *testing.T) {
	var events []time.Duration
	for fails := 1; fails <= 7; fails++ {
		events = append(events, EventDelay(fails))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("Event waits after 1..7 failures (-want +got):\n%s", diff)
	}
	var leases []time.Duration
	for d := FirstLeaseDelay; len(leases) < 5; d = NextLeaseDelay(d, 5*time.Second) {
		leases = append(leases, d)
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}, leases); diff != "" {
		t.Errorf("Lease waits with a 5s renewal (-want +got):\n%s", diff)
	}
}

// A conflict's backoff ends with the call.
func TestConflictBackoffEndsWithTheCall(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := ConflictBackoff(ctx, ConflictAttempts); err != context.Canceled {
		t.Errorf("a backoff of an ended call answered %v", err)
	}
	if err := ConflictBackoff(context.Background(), 1); err != nil {
		t.Errorf("the first backoff answered %v", err)
	}
}

package orchestrator

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"
)

// The retry policy of a write after optimistic-lock conflicts (Write).

// maxAttempts bounds the applies of one route in a call whose conflicts
// came from changes of the rules: between them the writer waits a little
// longer each time (backoff), with jitter, so writers contending for one
// route take turns.
const maxAttempts = 8

// maxBusyAttempts bounds the applies of one write guarded by the
// resourceVersion whose conflicts came from changes to what it does not
// write (another manager's labels, annotations, hostnames): the write,
// decided again, is the same, so it is sent again at once, without backoff,
// and these attempts do not count towards maxAttempts. On a route others
// write tens of times a second most such attempts conflict (the first write
// of a rollout, which takes spec.rules from its owner, has no other guard),
// so the bound is high: the call's deadline ends it first.
const maxBusyAttempts = 1000

// eventWait bounds how long a write waits for the watch cache to bring the
// change its apply conflicted with before it reads the route with a GET.
const eventWait = 100 * time.Millisecond

// backoff waits before attempt+1, or until ctx ends.
func backoff(ctx context.Context, attempt int) error {
	d := time.Duration(attempt*attempt)*5*time.Millisecond + time.Duration(rand.Int64N(int64(10*time.Millisecond)))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// keptChanging is the error of a write whose attempts all ended in
// optimistic-lock conflicts, busy of them after changes only to what the
// plugin does not write.
func keptChanging(attempts, busy int) error {
	if busy == 0 {
		return fmt.Errorf("the route kept changing under the plugin: %d attempts ended in optimistic-lock conflicts; the call is safe to repeat", attempts)
	}
	return fmt.Errorf("the route kept changing under the plugin: %d attempts ended in optimistic-lock conflicts, %d of them after changes only to "+
		"what the plugin does not write (another manager writing the route more often than the plugin can read and write it); the call is safe to repeat",
		attempts+busy, busy)
}

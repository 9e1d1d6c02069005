// Package retry is the plugin's retry policy in one place: which failures
// are tried again, by which loop, how often, and how long it waits between.
//
// Each kind of failure is tried again by the one loop that can act on it:
//
//   - Requests: a request that got no answer in time, or a 429 or a 5xx. The
//     transport of every client (package kubeclient) sends it again, if it is
//     safe to send twice, within the deadline of the call it belongs to.
//   - Conflicts: a route's apply answered with an optimistic-lock conflict.
//     The orchestrator reads the route again, decides again and applies again.
//   - Releases: the JSON patch that gives the plugin's ownership of a route
//     back, whose test failed because the plugin's own managedFields entry
//     changed meanwhile. Package ssa reads the route and patches again.
//   - Events: an Event the Events API did not take (package events).
//   - Leases: a process's Lease the apiserver did not take (package peers).
//
// Nothing else is tried again: a refusal (403, 404, 422) is the call's
// error at once.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Requests says how a request is tried again.
type Requests struct {
	// Timeout bounds each attempt of a request (not watches).
	Timeout time.Duration
	// Attempts bounds the attempts of one request, the first included.
	Attempts int
	// BaseDelay and MaxDelay bound the backoff before a retry: attempt n waits
	// a random time up to min(MaxDelay, BaseDelay·2ⁿ⁻¹), or what Retry-After
	// asks if that is longer.
	BaseDelay, MaxDelay time.Duration
}

// DefaultRequests is what the plugin uses unless told otherwise (its
// -request-timeout flag sets Timeout).
var DefaultRequests = Requests{Timeout: 10 * time.Second, Attempts: 5, BaseDelay: 100 * time.Millisecond, MaxDelay: 2 * time.Second}

// Delay is the wait before attempt+1: full jitter over an exponential bound,
// or the server's Retry-After (after) if longer.
func (p Requests) Delay(attempt int, after time.Duration) time.Duration {
	bound := p.BaseDelay << min(attempt-1, 20)
	if bound > p.MaxDelay || bound <= 0 {
		bound = p.MaxDelay
	}
	d := time.Duration(rand.Int64N(int64(bound) + 1))
	return max(d, after)
}

// Conflicts of a route's apply.
const (
	// ConflictAttempts bounds the applies of one route in a call whose
	// conflicts came from changes of the rules: between them the writer
	// waits a little longer each time (ConflictBackoff), with jitter, so
	// writers contending for one route take turns.
	ConflictAttempts = 8
	// BusyAttempts bounds the applies of one write guarded by the
	// resourceVersion whose conflicts came from changes to what it does not
	// write (another manager's labels, annotations, hostnames): the write,
	// decided again, is the same, so it is sent again at once, without
	// backoff, and these attempts do not count towards ConflictAttempts. On
	// a route others write tens of times a second most such attempts
	// conflict (the first write of a rollout, which takes spec.rules from
	// its owner, has no other guard), so the bound is high: the call's
	// deadline ends it first.
	BusyAttempts = 1000
	// ConflictEventWait bounds how long a write waits for the watch cache to
	// bring the change its apply conflicted with before it reads the route
	// with a GET.
	ConflictEventWait = 100 * time.Millisecond
)

// ConflictBackoff waits before attempt+1 of a route's apply after a
// conflict, or until ctx ends.
func ConflictBackoff(ctx context.Context, attempt int) error {
	d := time.Duration(attempt*attempt)*5*time.Millisecond + time.Duration(rand.Int64N(int64(10*time.Millisecond)))
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// ReleaseAttempts bounds the reads of a release whose test failed because
// the plugin's own entry changed meanwhile: each is sent again at once; the
// call's deadline ends them first.
const ReleaseAttempts = 1000

// EventDelay is how long an Event whose request failed fails times in a
// row (unanswered, a 5xx, a name taken) waits before it is sent again: a
// second, doubling, at most maxEventDelay.
func EventDelay(fails int) time.Duration {
	return min(maxEventDelay, time.Second<<min(fails, 5))
}

// maxEventDelay bounds EventDelay.
const maxEventDelay = 30 * time.Second

// Leases: registering a process's Lease waits FirstLeaseDelay after the
// first failure, then twice as long each time (NextLeaseDelay), at most
// the Lease's renewal period.
const FirstLeaseDelay = time.Second

// NextLeaseDelay is the wait after d, at most renewal.
func NextLeaseDelay(d, renewal time.Duration) time.Duration {
	return min(2*d, renewal)
}

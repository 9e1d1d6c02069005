package kubeclient

import (
	"context"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// The cleanup sweep's requests take their own share of a cluster's token
// bucket: a sweep walks every route and Rollout it may see, and the calls of
// the controller must not wait behind it.

// sweepShare is the part of the clients' rate and burst the sweeps may take.
const sweepShare = 4 // a quarter

type sweepKey struct{}

// ForSweeps marks the requests made with ctx as a cleanup sweep's: each
// takes a token of the sweeps' own bucket (a quarter of the clients' rate
// and burst) before one of the bucket every request shares, so a sweep
// never takes more than a quarter of the rate from the calls.
func ForSweeps(ctx context.Context) context.Context {
	return context.WithValue(ctx, sweepKey{}, true)
}

// sweeping says whether ctx is a sweep's (ForSweeps).
func sweeping(ctx context.Context) bool { return ctx.Value(sweepKey{}) != nil }

// shares is the rate limiter of a cluster's clients: every request takes a
// token of all; a sweep's takes one of sweeps first.
type shares struct {
	all, sweeps flowcontrol.RateLimiter
}

// newShares is the limiter of every request (all, made from qps and burst
// when nil) and the sweeps' share of qps and burst.
func newShares(all flowcontrol.RateLimiter, qps float32, burst int) *shares {
	if all == nil {
		all = tokenBucket(qps, burst)
	}
	if qps == 0 {
		qps = all.QPS()
	}
	sweeps := flowcontrol.NewFakeAlwaysRateLimiter()
	if qps > 0 {
		if burst <= 0 {
			burst = rest.DefaultBurst
		}
		sweeps = tokenBucket(qps/sweepShare, max(1, burst/sweepShare))
	}
	return &shares{all: all, sweeps: sweeps}
}

func (s *shares) Wait(ctx context.Context) error {
	if sweeping(ctx) {
		if err := s.sweeps.Wait(ctx); err != nil {
			return err
		}
	}
	return s.all.Wait(ctx)
}

// TryAccept and Accept know no context: they are every request's.
func (s *shares) TryAccept() bool { return s.all.TryAccept() }
func (s *shares) Accept()         { s.all.Accept() }
func (s *shares) QPS() float32    { return s.all.QPS() }

func (s *shares) Stop() {
	s.all.Stop()
	s.sweeps.Stop()
}

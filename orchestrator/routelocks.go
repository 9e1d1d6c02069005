package orchestrator

import (
	"context"
	"sync"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// routeLocks let one call of the process at a time write a route, and
// remember which routes the process wrote lately. A write guarded by field
// ownership alone does not see a write of the same field manager, so two
// calls of one process (two Rollouts sharing a route) must not both write
// from the same read: the second decides again from the first one's answer.
type routeLocks struct {
	// keep is how long a route the process wrote is remembered after its
	// last call let go of it: longer than any call lasts.
	keep time.Duration

	mu     sync.Mutex
	routes map[routes.Ref]*routeLock
	pruned time.Time
}

// routeLock is one route's lock.
type routeLock struct {
	locks *routeLocks
	ref   routes.Ref
	sem   chan struct{}
	// Under locks.mu: users are the calls holding the lock or waiting for
	// it; wroteAt is when the process last wrote the route (zero: never),
	// epoch the peers' epoch of that write (Exclusion).
	users   int
	wroteAt time.Time
	epoch   uint64
}

func newRouteLocks(keep time.Duration) *routeLocks {
	return &routeLocks{keep: keep, routes: map[routes.Ref]*routeLock{}}
}

// lock waits for the route's lock, until ctx ends. written says whether the
// process wrote the route lately (the caller then checks that its plan
// was decided from that write).
func (l *routeLocks) lock(ctx context.Context, ref routes.Ref) (r *routeLock, written bool, err error) {
	l.mu.Lock()
	r = l.routes[ref]
	if r == nil {
		r = &routeLock{locks: l, ref: ref, sem: make(chan struct{}, 1)}
		l.routes[ref] = r
	}
	r.users++
	l.mu.Unlock()
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		l.release(r)
		return nil, false, ctx.Err()
	}
	l.mu.Lock()
	written = !r.wroteAt.IsZero()
	l.mu.Unlock()
	return r, written, nil
}

// wrote records that the process wrote the route, in epoch.
func (r *routeLock) wrote(epoch uint64) {
	r.locks.mu.Lock()
	r.wroteAt, r.epoch = time.Now(), epoch
	r.locks.mu.Unlock()
}

// writtenIn says whether the process wrote the route in epoch (0: none).
func (r *routeLock) writtenIn(epoch uint64) bool {
	r.locks.mu.Lock()
	defer r.locks.mu.Unlock()
	return epoch != 0 && r.epoch == epoch
}

// unlock lets the next call write the route.
func (r *routeLock) unlock() {
	<-r.sem
	r.locks.release(r)
}

// release drops a call's use of the lock, and forgets the routes nobody
// uses that were not written within keep.
func (l *routeLocks) release(r *routeLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r.users--
	now := time.Now()
	if r.users > 0 || now.Sub(l.pruned) < l.keep/4 {
		return
	}
	l.pruned = now
	for ref, other := range l.routes {
		if other.users == 0 && now.Sub(other.wroteAt) > l.keep {
			delete(l.routes, ref)
		}
	}
}

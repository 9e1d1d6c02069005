package orchestrator

import (
	"context"
	"sync"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// Three things keep a write of the plugin from losing a change made since
// its route was read, each for a case the tests measure:
//
//   - The guard of each apply (ssa.Guard): the resourceVersion the write
//     was decided from, or field ownership alone where the plugin owns
//     spec.rules alone. A route whose labels, annotations or hostnames
//     others write tens of times a second makes nearly every apply that
//     carries its resourceVersion conflict; guarded by ownership, only a
//     change of the rules stops it (TestABusyRoutesMetadataDoesNotStopTheWalk
//     in test/contention_test.go).
//   - The route's lock (routeLock, held in locks): ownership does not see a change by the
//     same field manager, so two calls of one process (two Rollouts on one
//     route) write it one after the other, the second decided again on the
//     first one's answer (TestTwoCallsOfOneProcessWriteARouteOneAfterTheOther
//     here, TestTwoRolloutsShareOneRoute in test/ownership_test.go). The
//     lock remembers the peers' epoch of the route's last write: the first
//     write after the process became the only one carries the
//     resourceVersion, since a process gone a moment ago may have written
//     after what the cache holds.
//   - The peers (Exclusion, package peers): nor does ownership see another
//     process of the plugin's field manager; while one is there, or could
//     be, every apply carries the resourceVersion
//     (TestTwoProcessesOnOneRoute in test/contention_test.go).
type locks struct {
	peers        Exclusion // nil: every apply carries its resourceVersion
	fieldManager string
	// keep is how long a route the process wrote is remembered after its
	// last call let go of it: longer than any call lasts.
	keep time.Duration

	mu     sync.Mutex
	routes map[routes.Ref]*routeLock
	pruned time.Time
}

// routeLock is one route's lock.
type routeLock struct {
	locks *locks
	ref   routes.Ref
	sem   chan struct{}
	// Under locks.mu: users are the calls holding the lock or waiting for
	// it; wroteAt is when the process last wrote the route (zero: never),
	// epoch the peers' epoch of that write (Exclusion).
	users   int
	wroteAt time.Time
	epoch   uint64
	// chosen is the peers' epoch of the guard chosen last, for the holder
	// of the lock.
	chosen uint64
}

func newLocks(peers Exclusion, fieldManager string, keep time.Duration) *locks {
	return &locks{peers: peers, fieldManager: fieldManager, keep: keep, routes: map[routes.Ref]*routeLock{}}
}

// acquire waits for the route's lock, until ctx ends. written says whether
// the process wrote the route lately (the caller then checks that its plan
// was decided from that write).
func (g *locks) acquire(ctx context.Context, ref routes.Ref) (r *routeLock, written bool, err error) {
	g.mu.Lock()
	r = g.routes[ref]
	if r == nil {
		r = &routeLock{locks: g, ref: ref, sem: make(chan struct{}, 1)}
		g.routes[ref] = r
	}
	r.users++
	g.mu.Unlock()
	select {
	case r.sem <- struct{}{}:
	case <-ctx.Done():
		g.leave(r)
		return nil, false, ctx.Err()
	}
	g.mu.Lock()
	written = !r.wroteAt.IsZero()
	g.mu.Unlock()
	return r, written, nil
}

// chooseGuard chooses how an apply to the live route is guarded: by field
// ownership alone where that is enough, else by the resourceVersion. It is
// enough when the plugin owns spec.rules alone, no other process of its
// field manager is there, this process has written the route since it
// became the only one, and no apply to the route conflicted in this write
// (takeOver). leave must be called once the apply has ended.
func (r *routeLock) chooseGuard(ctx context.Context, live routes.Route, takeOver bool) (ssa.Guard, func(), error) {
	g := r.locks
	r.chosen = 0
	if g.peers == nil {
		return ssa.ByResourceVersion, func() {}, nil
	}
	alone, epoch, leave, err := g.peers.Enter(ctx)
	if err != nil {
		return ssa.ByResourceVersion, leave, err
	}
	r.chosen = epoch
	if alone && !takeOver && r.writtenIn(epoch) && live.ManagedFields.OwnsRules(g.fieldManager) && len(live.ManagedFields.RulesOwners(g.fieldManager)) == 0 {
		return ssa.ByOwnership, leave, nil
	}
	leave()
	return ssa.ByResourceVersion, func() {}, nil
}

// wrote records that the process wrote the route, in the epoch of the
// guard chosen last.
func (r *routeLock) wrote() { r.wroteIn(r.chosen) }

// gaveBack records that the plugin gave the route's ownership back: its
// next write carries the resourceVersion.
func (r *routeLock) gaveBack() { r.wroteIn(0) }

func (r *routeLock) wroteIn(epoch uint64) {
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
	r.locks.leave(r)
}

// leave drops a call's use of the lock, and forgets the routes nobody uses
// that were not written within keep.
func (g *locks) leave(r *routeLock) {
	g.mu.Lock()
	defer g.mu.Unlock()
	r.users--
	now := time.Now()
	if r.users > 0 || now.Sub(g.pruned) < g.keep/4 {
		return
	}
	g.pruned = now
	for ref, other := range g.routes {
		if other.users == 0 && now.Sub(other.wroteAt) > g.keep {
			delete(g.routes, ref)
		}
	}
}

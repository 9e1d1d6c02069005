package orchestrator

import (
	"context"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// guards keep a write of the plugin from losing a change made since its
// route was read. Three things do it, each for a case the tests measure:
//
//   - The guard of each apply (ssa.Guard): the resourceVersion the write
//     was decided from, or field ownership alone where the plugin owns
//     spec.rules alone. A route whose labels, annotations or hostnames
//     others write tens of times a second makes nearly every apply that
//     carries its resourceVersion conflict; guarded by ownership, only a
//     change of the rules stops it (test/contention_test.go,
//     TestABusyRoutesMetadataDoesNotStopTheWalk).
//   - The route's lock (routeLocks): ownership does not see a change by the
//     same field manager, so two calls of one process (two Rollouts on one
//     route) write it one after the other, the second decided again on the
//     first one's answer (TestTwoCallsOfOneProcessWriteARouteOneAfterTheOther
//     here, TestTwoRolloutsShareOneRoute in test/ownership_test.go). The lock remembers the
//     peers' epoch of the route's last write: the first write after the
//     process became the only one carries the resourceVersion, since a
//     process gone a moment ago may have written after what the cache holds.
//   - The peers (Exclusion, package peers): nor does ownership see another
//     process of the plugin's field manager; while one is there, or could
//     be, every apply carries the resourceVersion
//     (test/contention_test.go, TestTwoProcessesOnOneRoute).
type guards struct {
	locks        *routeLocks
	peers        Exclusion // nil: every apply carries its resourceVersion
	fieldManager string
}

// turn is one call's hold of a route's lock, from lock to unlock.
type turn struct {
	route *routeLock
	peers Exclusion
	fm    string
	epoch uint64 // the peers' epoch of the last guard chosen
}

// lock waits for the route's lock, until ctx ends. written says whether the
// process wrote the route lately (the caller then checks that its plan was
// decided from that write).
func (g *guards) lock(ctx context.Context, ref routes.Ref) (t *turn, written bool, err error) {
	route, written, err := g.locks.lock(ctx, ref)
	if err != nil {
		return nil, false, err
	}
	return &turn{route: route, peers: g.peers, fm: g.fieldManager}, written, nil
}

// unlock lets the next call write the route.
func (t *turn) unlock() { t.route.unlock() }

// guard chooses how an apply to the live route is guarded: by field
// ownership alone where that is enough, else by the resourceVersion. It is
// enough when the plugin owns spec.rules alone, no other process of its
// field manager is there, this process has written the route since it
// became the only one, and no apply to the route conflicted in this write
// (takeOver). leave must be called once the apply has ended.
func (t *turn) guard(ctx context.Context, live routes.Route, takeOver bool) (ssa.Guard, func(), error) {
	t.epoch = 0
	if t.peers == nil {
		return ssa.ByResourceVersion, func() {}, nil
	}
	alone, epoch, leave, err := t.peers.Enter(ctx)
	if err != nil {
		return ssa.ByResourceVersion, leave, err
	}
	t.epoch = epoch
	if alone && !takeOver && t.route.writtenIn(epoch) && routes.OwnsRules(live.ManagedFields, t.fm) && len(routes.RulesOwners(live.ManagedFields, t.fm)) == 0 {
		return ssa.ByOwnership, leave, nil
	}
	leave()
	return ssa.ByResourceVersion, func() {}, nil
}

// wrote records that the process wrote the route, in the epoch of the
// guard chosen last.
func (t *turn) wrote() { t.route.wrote(t.epoch) }

// released records that the route is someone else's now: its next write
// carries the resourceVersion.
func (t *turn) released() { t.route.wrote(0) }

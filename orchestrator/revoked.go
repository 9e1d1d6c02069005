package orchestrator

import (
	"context"
	"fmt"
	"sync"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A grant revoked mid-rollout. A Rollout reaches another namespace's routes
// only while that namespace grants it; when the grant goes, every call that
// would set something there is refused, and the Rollout's own entries would
// stay on the route for good. So a call that only undoes (desired.Undoes:
// the abort's RemoveManagedRoutes and SetWeight(0)) may still take back the
// Rollout's own claim on a route it names there, where this process saw the
// claim at one of the Rollout's granted calls: that route alone is read (a
// GET), and written only if it still holds the claim. Nothing else of the
// namespace is read; a route a selector found, or one the process has not
// seen the claim on (after a restart), is left to the platform team's
// cleanup or to the grant given back (docs/troubleshooting.md).

// maxClaimMemory bounds the (Rollout, route) pairs remembered; past it the
// oldest goes, whose undo after a revoked grant then needs cleanup.
const maxClaimMemory = 4096

type claimKey struct {
	rollout string
	route   routes.Ref
}

// claimMemory is where each Rollout had a claim at its last granted call.
type claimMemory struct {
	mu    sync.Mutex
	seen  map[claimKey]uint64
	order uint64
}

// note records whether the Rollout has a claim on the route after a call.
func (m *claimMemory) note(rollout string, route routes.Ref, has bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := claimKey{rollout, route}
	if !has {
		delete(m.seen, k)
		return
	}
	if m.seen == nil {
		m.seen = map[claimKey]uint64{}
	}
	m.order++
	m.seen[k] = m.order
	if len(m.seen) > maxClaimMemory {
		var oldest claimKey
		first := m.order
		for k, n := range m.seen {
			if n < first {
				oldest, first = k, n
			}
		}
		delete(m.seen, oldest)
	}
}

// has says whether the Rollout had a claim on the route at its last call.
func (m *claimMemory) has(rollout string, route routes.Ref) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.seen[claimKey{rollout, route}]
	return ok
}

// ownClaimsOnly carries out an undoing call's reach where grants are
// missing (refused): it returns the targets without the refused ones, the
// routes to undo (those remembered with the Rollout's claim that still hold
// it, read fresh), and the refusals of every other refused target.
func (o *Orchestrator) ownClaimsOnly(ctx context.Context, c rollout.Call, t routes.Targets, refused []*routes.NotGrantedError) (routes.Targets, []routes.Route, []error, error) {
	rollout := c.Rollout.String()
	drop := map[routes.Ref]bool{}
	dropSel := map[routes.Selection]bool{}
	var undo []routes.Route
	var still []error
	for _, e := range refused {
		if e.Name == "" {
			still = append(still, e)
			for _, sel := range t.Selectors {
				if sel.Namespace == e.Namespace && sel.Kind == e.Kind {
					dropSel[sel] = true
				}
			}
			continue
		}
		ref := routes.Ref{Kind: e.Kind, Namespace: e.Namespace, Name: e.Name}
		drop[ref] = true
		if !o.claimed.has(rollout, ref) {
			still = append(still, e)
			continue
		}
		r, err := o.reader.Fresh(ctx, ref)
		if apierrors.IsNotFound(err) {
			o.claimed.note(rollout, ref, false)
			continue
		}
		if err != nil {
			return routes.Targets{}, nil, nil, fmt.Errorf("reading %s to take back the claim of rollout %s, whose grant is missing: %w", ref, rollout, err)
		}
		if r.Namespace != ref.Namespace || r.Name != ref.Name {
			return routes.Targets{}, nil, nil, fmt.Errorf("reading %s to take back the claim of rollout %s: the apiserver answered with %s/%s", ref, rollout, r.Namespace, r.Name)
		}
		if claims, err := routes.ReadClaims(r); err != nil || claims[rollout].Empty() {
			o.claimed.note(rollout, ref, false)
			still = append(still, e)
			continue
		}
		undo = append(undo, r)
	}
	var out routes.Targets
	for _, ref := range t.Named {
		if !drop[ref] {
			out.Named = append(out.Named, ref)
		}
	}
	for _, sel := range t.Selectors {
		if !dropSel[sel] {
			out.Selectors = append(out.Selectors, sel)
		}
	}
	if len(undo) > 0 {
		o.log.WithFields(logrus.Fields{"rollout": rollout, "call": c.Name, "routes": len(undo)}).
			Warn("a ReferenceGrant the Rollout's routes need is missing: the call only takes back the Rollout's own claim there")
	}
	return out, undo, still, nil
}

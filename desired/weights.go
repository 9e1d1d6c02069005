package desired

import (
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Desired gives the canary its weight, each experiment Service its weight and
// stable the rest, in every weighted rule; experiment backendRefs the Rollout
// added before and no longer asks for leave.
func (c SetWeight) Desired(live routes.Route, env Env) (Result, error) {
	return decide(live, env, c.decide)
}

func (c SetWeight) decide(s state) (Result, error) {
	sticky := c.stickyInPlay(s)
	view := c.view(s, sticky)
	res, err := transform.Weigh(view)
	if err != nil {
		return Result{}, invalid(err)
	}
	rules, changes, weights := res.Rules, res.Changes, res.Weights
	claim := s.claim
	claim.CanaryWeight, claim.Backends, claim.CanaryRefs = c.Split.CanaryWeight, res.Backends, res.CanaryRefs
	if sticky {
		if rules, claim, changes, err = c.sticky(s, rules, claim, changes); err != nil {
			return Result{}, err
		}
		weights = transform.RecordWeights(view.Live.Namespace, rules, view.Split, res.Backends, view.Targeting)
	}
	claim.Weights = weights
	if !claim.Active() {
		claim = routes.Claim{} // the Rollout ends here: nothing left to record
	}
	return s.finish(rules, changes, claim, true)
}

// view is what the call's rule work reads of the route, built once: the
// live route, the targeting, the claim's canary and experiment backendRefs,
// the backendRef filters the plugin added, and the call's split and
// experiment. With sticky the weights are recorded after the sticky step.
func (c SetWeight) view(s state, sticky bool) transform.WeighInput {
	return transform.WeighInput{Live: s.live, Split: c.Split, Experiment: c.Experiment, Targeting: s.targeting(),
		CanaryRefs: s.claim.CanaryRefs, Backends: s.claim.Backends, AddedRefFilters: s.claims.AddedRefFilters(),
		Ends: c.ends(), AddCanaryBackendRef: s.env.AddCanaryBackendRef, StickyNext: sticky}
}

// stickyInPlay says the call has a sticky step: the Rollout has
// stickyCanary, or its claim records sticky rules or cookie filters to take
// away.
func (c SetWeight) stickyInPlay(s state) bool {
	return c.Sticky != nil || len(s.claim.StickyRules) > 0 || len(s.claim.RefFilters) > 0
}

// sticky puts the cookie filters and rules of stickyCanary on the rules
// while the canary and stable both have weight, and takes those the claim
// records away otherwise.
func (c SetWeight) sticky(s state, rules []routes.Rule, claim routes.Claim, changes []routes.Change) ([]routes.Rule, routes.Claim, []routes.Change, error) {
	in := transform.StickyInput{Stable: c.Split.Stable, Canary: c.Split.Canary, Targeting: s.targeting(),
		ClaimedRules: s.claim.StickyRules, ClaimedFilters: s.claim.RefFilters,
		AddedFilters: s.claims.AddedFilters(), AddedRefFilters: s.claims.AddedRefFilters()}
	if c.Sticky != nil && c.Split.CanaryWeight > 0 && c.Split.StableWeight() > 0 {
		in.Sticky = c.Sticky
	}
	res, err := transform.SetSticky(s.live, rules, in)
	if err != nil {
		return nil, routes.Claim{}, nil, invalid(err)
	}
	claim.Rules, claim.StickyRules, claim.RefFilters = append(claim.ManagedRules(), res.Claimed...), res.Claimed, res.Filters
	claim, changes = s.recordRules(res.Rules, claim, append(changes, res.Changes...))
	return res.Rules, claim, changes, nil
}

// ends says the call ends the rollout on the route: no canary weight, no
// experiment.
func (c SetWeight) ends() bool {
	return c.Split.CanaryWeight == 0 && len(c.Experiment.Destinations) == 0
}

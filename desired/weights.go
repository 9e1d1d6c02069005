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
	live := s.live
	routed, canaryRefs, changes := c.canaryRefs(s)
	rules, weightChanges, err := transform.SetWeights(routed, c.Split, s.targeting())
	if err != nil && !c.endsOnStableOnly(s, routed) {
		return Result{}, invalid(err)
	} else if err != nil {
		rules, err = routed.Rules, nil // the canary's backendRefs are gone: nothing to weigh
	}
	exp := c.Experiment
	exp.Targeting = s.targeting()
	rules, backends, expChanges, err := transform.SetExperimentRefs(live, rules, exp, s.claim.Backends)
	if err != nil {
		return Result{}, invalid(err)
	}
	claim := s.claim
	claim.CanaryWeight, claim.Backends, claim.CanaryRefs = c.Split.CanaryWeight, backends, canaryRefs
	changes = append(changes, transform.Notes(weightChanges)...)
	changes = append(changes, expChanges...)
	if c.Sticky != nil || len(s.claim.StickyRules) > 0 || len(s.claim.RefFilters) > 0 {
		if rules, claim, changes, err = c.sticky(s, rules, claim, changes); err != nil {
			return Result{}, err
		}
	}
	claim.Weights = recordWeights(live.Namespace, rules, c.Split, backends, s.targeting())
	if !claim.Active() {
		claim = routes.Claim{} // the Rollout ends here: nothing left to record
	}
	return s.finish(rules, changes, claim, true)
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

// canaryRefs is the live route with the canary backendRefs addCanaryBackendRef
// adds while the canary or an experiment has weight, or without those the
// claim records when the call ends the rollout; and their record.
func (c SetWeight) canaryRefs(s state) (routes.Route, []routes.AddedCanary, []routes.Change) {
	in := transform.CanaryInput{Stable: c.Split.Stable, Canary: c.Split.Canary, Targeting: s.targeting(), AddedRefFilters: s.claims.AddedRefFilters()}
	routed := s.live
	var changes []routes.Change
	switch {
	case c.ends():
		routed.Rules, changes = transform.RemoveCanary(s.live, s.live.Rules, in, s.claim.CanaryRefs)
		return routed, nil, changes
	case s.env.AddCanaryBackendRef:
		var refs []routes.AddedCanary
		routed.Rules, refs, changes = transform.AddCanary(s.live, s.live.Rules, in, s.claim.CanaryRefs)
		return routed, refs, changes
	}
	return routed, s.claim.CanaryRefs, nil
}

// endsOnStableOnly says a call that ends the rollout finds, with
// addCanaryBackendRef, only rules that hold the stable backendRef alone:
// there is no weight to set.
func (c SetWeight) endsOnStableOnly(s state, routed routes.Route) bool {
	t := s.targeting()
	return c.ends() && (s.env.AddCanaryBackendRef || len(s.claim.CanaryRefs) > 0) &&
		len(transform.WeightedRules(routed.Namespace, routed.Rules, c.Split.Stable, c.Split.Canary, t)) == 0 &&
		len(transform.StableOnly(routed.Namespace, routed.Rules, c.Split.Stable, c.Split.Canary, t)) > 0
}

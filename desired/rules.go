package desired

import (
	"fmt"
	"slices"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Which routes take added rules:
//
//   - header rules: the HTTPRoutes and GRPCRoutes that take header routes
//     (Env.TakesHeaderRoutes); on the Rollout's other routes the call leaves
//     none of its rules;
//   - mirror rules: every HTTPRoute and GRPCRoute of the Rollout;
//   - TCPRoutes, TLSRoutes and UDPRoutes have no matches and take neither,
//     unless the Rollout lists one with useHeaderRoutes: true, which is an
//     error when a step adds a rule.
//
// Every rule added is recorded by name in the Rollout's claim on the route,
// which is how it is removed later and how setting weights knows to leave it
// alone.

// Desired gives the route the header rules of the call's managedRoutes
// entry, or takes them away.
func (c SetHeader) Desired(live routes.Route, env Env) (Result, error) {
	return decide(live, env, c.decide)
}

func (c SetHeader) decide(s state) (Result, error) {
	live, env := s.live, s.env
	match := c.Match
	switch {
	case !live.Kind.HasMatches() && len(c.Match) > 0 && env.ListedForHeaderRoutes:
		return Result{}, invalid(fmt.Errorf("listed with useHeaderRoutes: true, but a %s has no matches and cannot take header route %q; remove useHeaderRoutes from its entry", live.Kind, c.Name))
	case !live.Kind.HasMatches() || !env.TakesHeaderRoutes:
		// Not a header route: the entry's rules must not be here (they are,
		// if the route stopped taking header routes since they were added).
		match = nil
	}
	res, err := transform.SetHeaderRules(live, s.ruleInput(c.Rules), c.Name, match)
	if err != nil {
		return Result{}, invalid(err)
	}
	return s.finishRules(res, s.claim.MirrorFilters)
}

// Desired gives the route the mirror rule of the call's managedRoutes entry,
// or takes it away.
func (c SetMirror) Desired(live routes.Route, env Env) (Result, error) {
	return decide(live, env, c.decide)
}

func (c SetMirror) decide(s state) (Result, error) {
	live, env := s.live, s.env
	match, adding := c.Match, c.adding()
	if !live.Kind.HasMatches() {
		if adding && env.ListedForHeaderRoutes {
			return Result{}, invalid(fmt.Errorf("listed with useHeaderRoutes: true, but a %s has no matches and cannot take mirror route %q; remove useHeaderRoutes from its entry", live.Kind, c.Name))
		}
		match, adding = nil, false
	}
	filterMode := env.MirrorMode == MirrorFilter
	if filterMode {
		match = nil // the entry's rule, from rule mode, goes
	}
	res, err := transform.SetMirrorRule(live, s.ruleInput(c.Rules), c.Name, match, c.Percent)
	if err != nil {
		return Result{}, invalid(err)
	}
	// In rule mode the entry's filters, from filter mode, go.
	withRule := live
	withRule.Rules = res.Rules
	filters, err := transform.SetMirrorFilters(withRule, s.ruleInput(c.Rules), s.claim.MirrorFilters, c.Name, c.Percent, filterMode && adding)
	if err != nil {
		return Result{}, invalid(err)
	}
	res.Rules, res.Changes = filters.Rules, append(res.Changes, filters.Changes...)
	return s.finishRules(res, filters.Claimed)
}

// Desired takes away every rule and mirror filter the claim records as added
// for the Rollout.
// The claim, not the Rollout's managedRoutes, decides: a rule the Rollout
// added under a name it no longer lists still goes, and a rule named like one
// of its managedRoutes that it did not add stays.
func (RemoveManaged) Desired(live routes.Route, env Env) (Result, error) {
	return decide(live, env, RemoveManaged{}.decide)
}

func (c RemoveManaged) decide(s state) (Result, error) {
	live := s.live
	// stickyCanary's rules are not managed routes: SetWeight takes them away.
	managed := s.claim.ManagedRules()
	res := transform.RulesResult{Rules: routes.CopyRules(live.Rules)}
	if len(managed) > 0 {
		res = transform.RemoveAddedRules(live, managed)
	}
	res.Claimed = slices.Clone(s.claim.StickyRules)
	rules, changes := transform.RemoveMirrorFilters(res.Rules, s.claim.MirrorFilters)
	res.Rules, res.Changes = rules, append(res.Changes, changes...)
	return s.finishRules(res, nil)
}

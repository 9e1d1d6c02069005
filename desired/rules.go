package desired

import (
	"fmt"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Which routes take added rules:
//
//   - header rules: the HTTPRoutes and GRPCRoutes that take header routes
//     (Env.TakesHeaderRoutes); on the Rollout's other routes the call leaves
//     none of its rules;
//   - mirror rules: every HTTPRoute and GRPCRoute of the Rollout;
//   - TCPRoutes and TLSRoutes have no matches and take neither, unless the
//     Rollout lists one with useHeaderRoutes: true, which is an error when a
//     step adds a rule.
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
	case !HasMatches(live.Kind) && len(c.Match) > 0 && env.ListedForHeaderRoutes:
		return Result{}, invalid(fmt.Errorf("listed with useHeaderRoutes: true, but a %s has no matches and cannot take header route %q; remove useHeaderRoutes from its entry", live.Kind, c.Name))
	case !HasMatches(live.Kind) || !env.TakesHeaderRoutes:
		// Not a header route: the set must not be here (it is, if the route
		// stopped taking header routes since it was added).
		match = nil
	}
	res, err := routes.SetHeaderRules(live, s.ruleInput(c.Rules), c.Name, match)
	if err != nil {
		return Result{}, invalid(err)
	}
	return s.finishRules(res)
}

// Desired gives the route the mirror rule of the call's managedRoutes entry,
// or takes it away.
func (c SetMirror) Desired(live routes.Route, env Env) (Result, error) {
	return decide(live, env, c.decide)
}

func (c SetMirror) decide(s state) (Result, error) {
	live, env := s.live, s.env
	match := c.Match
	if !HasMatches(live.Kind) {
		if c.adding() && env.ListedForHeaderRoutes {
			return Result{}, invalid(fmt.Errorf("listed with useHeaderRoutes: true, but a %s has no matches and cannot take mirror route %q; remove useHeaderRoutes from its entry", live.Kind, c.Name))
		}
		match = nil
	}
	res, err := routes.SetMirrorRule(live, s.ruleInput(c.Rules), c.Name, match, c.Percent)
	if err != nil {
		return Result{}, invalid(err)
	}
	return s.finishRules(res)
}

// Desired takes away every rule the claim records as added for the Rollout.
// The claim, not the Rollout's managedRoutes, decides: a rule the Rollout
// added under a name it no longer lists still goes, and a rule named like one
// of its managedRoutes that it did not add stays.
func (RemoveManaged) Desired(live routes.Route, env Env) (Result, error) {
	return decide(live, env, RemoveManaged{}.decide)
}

func (c RemoveManaged) decide(s state) (Result, error) {
	live := s.live
	if len(s.claim.Rules) == 0 {
		return s.finishRules(routes.RulesResult{Rules: routes.CopyRules(live.Rules)})
	}
	return s.finishRules(routes.RemoveAddedRules(live, s.claim.Rules))
}

// HasMatches says whether the kind's rules have matches, and so can take
// header and mirror rules.
func HasMatches(k routes.Kind) bool { return k == routes.HTTPRoute || k == routes.GRPCRoute }

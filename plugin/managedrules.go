package plugin

import (
	"errors"
	"fmt"
	"slices"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"

	"github.com/gatewayapi-ssa/rollouts-plugin/pingpong"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
)

// Header and mirror rules (routes/managedrules.go computes them). Which
// routes take them:
//
//   - header rules: the HTTPRoutes and GRPCRoutes that take header routes (the
//     single httpRoute/grpcRoute form, and list entries with useHeaderRoutes:
//     true); the Rollout's other routes are left as they are;
//   - mirror rules: every HTTPRoute and GRPCRoute the Rollout manages;
//   - TCPRoutes and TLSRoutes have no matches and take neither: they are
//     skipped, unless a tcpRoutes/tlsRoutes entry asks for header routes,
//     which is an error when a step adds a rule.
//
// Every rule added is recorded by name in the Rollout's claim on the route,
// which is how it is removed later and how setting weights knows to leave it
// alone.

// setHeaderRoute implements SetHeaderRoute.
func (p *Plugin) setHeaderRoute(ro *v1alpha1.Rollout, h *v1alpha1.SetHeaderRoute) types.RpcError {
	if h == nil {
		return p.fail(ro, "SetHeaderRoute", errors.New("no setHeaderRoute given"))
	}
	call := fmt.Sprintf("SetHeaderRoute(%s)", h.Name)
	adding := len(h.Match) > 0
	in, err := p.managedInput(ro, "setHeaderRoute", h.Name, adding)
	if err != nil {
		return p.fail(ro, call, err)
	}
	if adding {
		if s, err := ParseConfig(ro, p.opts.PluginName); err == nil && !takesHeaderRoutes(s) {
			return p.fail(ro, call, errors.New("no HTTPRoute or GRPCRoute of the Rollout takes header routes: name one with httpRoute or grpcRoute, or list it under httpRoutes or grpcRoutes with useHeaderRoutes: true, or set selectedRoutesUseHeaderRoutes: true for routes found by a selector; nothing was written"))
		}
	}
	listed := p.listedForHeaderRoutes(ro)
	key := ro.Namespace + "/" + ro.Name
	return p.update(ro, call, func(s Settings, live routes.Route) (ssa.Desired, error) {
		claims, err := routes.ReadClaims(live)
		if err != nil {
			return ssa.Desired{}, err
		}
		match := h.Match
		switch {
		case !hasMatches(live.Kind) && adding && listed[live.Ref]:
			return ssa.Desired{}, fmt.Errorf("listed with useHeaderRoutes: true, but a %s has no matches and cannot take header route %q; remove useHeaderRoutes from its entry", live.Kind, h.Name)
		case !hasMatches(live.Kind) || !s.TakesHeaderRoutes(live.Ref):
			// Not a header route: the set must not be here (it is, if the
			// route stopped taking header routes since it was added).
			match = nil
		}
		claim := claims[key]
		res, err := routes.SetHeaderRules(live, claim.Rules, in, h.Name, match)
		if err != nil {
			return ssa.Desired{}, err
		}
		return p.managedDesired(s, key, live, claims, res)
	})
}

// setMirrorRoute implements SetMirrorRoute.
func (p *Plugin) setMirrorRoute(ro *v1alpha1.Rollout, m *v1alpha1.SetMirrorRoute) types.RpcError {
	if m == nil {
		return p.fail(ro, "SetMirrorRoute", errors.New("no setMirrorRoute given"))
	}
	call := fmt.Sprintf("SetMirrorRoute(%s)", m.Name)
	adding := len(m.Match) > 0 && (m.Percentage == nil || *m.Percentage != 0)
	in, err := p.managedInput(ro, "setMirrorRoute", m.Name, adding)
	if err != nil {
		return p.fail(ro, call, err)
	}
	listed := p.listedForHeaderRoutes(ro)
	key := ro.Namespace + "/" + ro.Name
	return p.update(ro, call, func(s Settings, live routes.Route) (ssa.Desired, error) {
		claims, err := routes.ReadClaims(live)
		if err != nil {
			return ssa.Desired{}, err
		}
		match := m.Match
		if !hasMatches(live.Kind) {
			if adding && listed[live.Ref] {
				return ssa.Desired{}, fmt.Errorf("listed with useHeaderRoutes: true, but a %s has no matches and cannot take mirror route %q; remove useHeaderRoutes from its entry", live.Kind, m.Name)
			}
			match = nil
		}
		claim := claims[key]
		res, err := routes.SetMirrorRule(live, claim.Rules, in, m.Name, match, m.Percentage)
		if err != nil {
			return ssa.Desired{}, err
		}
		return p.managedDesired(s, key, live, claims, res)
	})
}

// removeManagedRoutes implements RemoveManagedRoutes: every rule recorded as
// added for the Rollout goes, on every route it manages. The record, not
// spec.strategy.canary.trafficRouting.managedRoutes, decides: a rule the
// Rollout added under a managed route name it no longer lists still goes, and
// a rule named like one of its managed routes that it did not add stays.
func (p *Plugin) removeManagedRoutes(ro *v1alpha1.Rollout) types.RpcError {
	key := ro.Namespace + "/" + ro.Name
	return p.update(ro, callRemoveManagedRoutes, func(s Settings, live routes.Route) (ssa.Desired, error) {
		claims, err := routes.ReadClaims(live)
		if err != nil {
			return ssa.Desired{}, err
		}
		claim, ok := claims[key]
		if !ok || len(claim.Rules) == 0 {
			return p.managedDesired(s, key, live, claims, routes.ManagedResult{Rules: routes.CopyRules(live.Rules), Claimed: claim.Rules})
		}
		res := routes.RemoveAddedRules(live, claim.Rules)
		res.Claimed = nil
		return p.managedDesired(s, key, live, claims, res)
	})
}

// managedInput is what the transforms need from the Rollout. A step that
// adds a rule must name one of the Rollout's managedRoutes (Argo Rollouts
// validates that too) and needs the stable and canary Services; one that
// removes needs neither.
func (p *Plugin) managedInput(ro *v1alpha1.Rollout, step, name string, adding bool) (routes.ManagedInput, error) {
	tr := ro.Spec.Strategy.Canary
	if tr == nil || tr.TrafficRouting == nil {
		return routes.ManagedInput{}, errors.New("spec.strategy.canary.trafficRouting is not set")
	}
	var in routes.ManagedInput
	for _, r := range tr.TrafficRouting.ManagedRoutes {
		in.RouteNames = append(in.RouteNames, r.Name)
	}
	if name == "" {
		return in, fmt.Errorf("the %s step has no name", step)
	}
	if !adding {
		return in, nil
	}
	if !slices.Contains(in.RouteNames, name) {
		return in, fmt.Errorf("%s %q is not listed in spec.strategy.canary.trafficRouting.managedRoutes %v; add it there", step, name, in.RouteNames)
	}
	stable, canary, err := pingpong.Services(ro)
	if err != nil {
		return in, err
	}
	in.Stable, in.Canary = routes.ServiceRef(ro.Namespace, stable), routes.ServiceRef(ro.Namespace, canary)
	return in, nil
}

// listedForHeaderRoutes are the TCPRoutes and TLSRoutes that the Rollout
// lists with useHeaderRoutes: true (the single tcpRoute/tlsRoute form asks
// for nothing). A config that does not parse gives none: update reports it.
func (p *Plugin) listedForHeaderRoutes(ro *v1alpha1.Rollout) map[routes.Ref]bool {
	out := map[routes.Ref]bool{}
	c := ro.Spec.Strategy.Canary
	if c == nil || c.TrafficRouting == nil {
		return out
	}
	cfg, err := decodeConfig(c.TrafficRouting.Plugins[p.opts.PluginName])
	if err != nil {
		return out
	}
	ns := cfg.Namespace
	if ns == "" {
		ns = ro.Namespace
	}
	for kind, list := range map[routes.Kind][]NamedRoute{routes.TCPRoute: cfg.TCPRoutes, routes.TLSRoute: cfg.TLSRoutes} {
		for _, r := range list {
			if r.UseHeaderRoutes {
				out[routes.Ref{Kind: kind, Namespace: ns, Name: r.Name}] = true
			}
		}
	}
	return out
}

// takesHeaderRoutes says whether any route of the config takes header rules.
func takesHeaderRoutes(s Settings) bool {
	for ref, ok := range s.HeaderRoutes {
		if ok && hasMatches(ref.Kind) {
			return true
		}
	}
	for _, sel := range s.Targets.Selectors {
		if s.SelectedHeaderRoutes && hasMatches(sel.Kind) {
			return true
		}
	}
	return false
}

// hasMatches says whether the kind's rules have matches, and so can take
// header and mirror rules.
func hasMatches(k routes.Kind) bool { return k == routes.HTTPRoute || k == routes.GRPCRoute }

// managedDesired is the route's desired state after a header, mirror or
// removal call: the rules, the claims, and the in-progress label while any
// Rollout has something on the route; when none has, the plugin gives up its
// ownership (as SetWeight does).
// A rule this Rollout added that someone else changed, and that this call
// would change again, is a conflict as for weights (checkConflict).
func (p *Plugin) managedDesired(s Settings, key string, live routes.Route, claims routes.Claims, res routes.ManagedResult) (ssa.Desired, error) {
	claim := claims[key]
	takeover, err := p.checkConflict(s, key, live, claim, res.Rules)
	if err != nil {
		return ssa.Desired{}, err
	}
	claim.Rules = res.Claimed
	claim.RuleDigests = routes.DigestRules(res.Rules, claim.Rules)
	claims[key] = claim
	d := ssa.Desired{Rules: res.Rules, Annotations: claims.Annotations(), Changes: append(res.Changes, takeover...), Release: len(claims.Rollouts()) == 0}
	if !d.Release {
		d.Labels = s.InProgressLabel
	}
	return d, nil
}

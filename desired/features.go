package desired

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Unchecked is what a write carries to a gateway that does not say whether
// it supports it: written as before the check existed, and logged.
type Unchecked struct {
	Gateway routes.Gateway
	Needs   []RuleNeed
}

func (u Unchecked) String() string {
	why := u.Gateway.Unknown
	if why == "" {
		why = "its status.supportedFeatures lists nothing"
	}
	return fmt.Sprintf("%s: %s; written without checking that it carries %s", u.Gateway, why, needList(u.Needs))
}

// RuleNeed is a feature that one rule the call writes needs.
type RuleNeed struct {
	// Rule names the rule: its name, or its index.
	Rule string
	transform.Need
}

// needList says what each rule needs: `rule "m" needs A (why) and B (why)`.
func needList(needs []RuleNeed) string {
	var rules []string
	byRule := map[string][]string{}
	for _, n := range needs {
		if _, ok := byRule[n.Rule]; !ok {
			rules = append(rules, n.Rule)
		}
		byRule[n.Rule] = append(byRule[n.Rule], n.Need.String())
	}
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = r + " needs " + strings.Join(byRule[r], " and ")
	}
	return strings.Join(parts, "; ")
}

// UnsupportedError says a call would write, for the Rollout, a rule that
// needs a feature a parent's GatewayClass says it lacks: such a gateway
// serves errors, or nothing, where the rule applies (Traefik answers 500 to
// every request a rule with an unsupported filter matches). Nothing is
// written.
type UnsupportedError struct {
	Route   routes.Ref
	Rollout string
	Gateway routes.Gateway
	Missing []RuleNeed
}

// Reason is the Event reason of the error (package events).
func (e *UnsupportedError) Reason() string { return "GatewayUnsupported" }

func (e *UnsupportedError) Error() string {
	features := make([]string, 0, len(e.Missing))
	for _, n := range e.Missing {
		if !slices.Contains(features, n.Feature) {
			features = append(features, n.Feature)
		}
	}
	return fmt.Sprintf("%s: rollout %s: %s; %s does not list %s in status.supportedFeatures, so that gateway would not carry it "+
		"(it may answer errors to the requests the rule matches); nothing was written. Remove or change the step, route through a gateway "+
		"whose class supports it, or, if this gateway carries it anyway, list %s in assumeGatewayFeatures in the Rollout's plugin config",
		e.Route, e.Rollout, needList(e.Missing), e.Gateway, strings.Join(features, ", "), strings.Join(features, ", "))
}

// Facts are what a decision's result is checked against, read from the
// route's cluster for it (orchestrator.Decide): the route's parents, read
// when the result needs a feature of them (Result.Needs), and the
// ServiceImports it adds (Decided.Imports), read in order up to the first that
// is missing or could not be read.
type Facts struct {
	Gateways []routes.Gateway
	Imports  []ImportRead
}

// Check is res checked against the facts: refused when a parent's class
// lacks a feature what it adds needs (checkFeatures), or the route's
// cluster lacks a ServiceImport it adds (CheckImports).
func Check(res Result, live routes.Route, env Env, f Facts) (Result, error) {
	res, err := checkFeatures(res, live, env, f.Gateways)
	if err != nil {
		return Result{}, err
	}
	if err := checkImports(live, env, f.Imports); err != nil {
		return Result{}, err
	}
	return res, nil
}

// checkFeatures is res checked against the route's parents: refused
// (UnsupportedError) when a class that publishes its features lacks one
// the Rollout's config does not assume (Env.AssumedFeatures); parents that
// publish nothing go to Result.Unchecked.
func checkFeatures(res Result, live routes.Route, env Env, gateways []routes.Gateway) (Result, error) {
	for _, g := range gateways {
		if g.Unknown != "" || !g.Publishes {
			res.Unchecked = append(res.Unchecked, Unchecked{Gateway: g, Needs: res.Needs})
			continue
		}
		var missing []RuleNeed
		for _, n := range res.Needs {
			if !slices.Contains(g.Features, n.Feature) && !slices.Contains(env.AssumedFeatures, n.Feature) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return Result{}, &UnsupportedError{Route: live.Ref, Rollout: env.Rollout, Gateway: g, Missing: missing}
		}
	}
	return res, nil
}

// introduced are the features needed by what the call adds that the live
// route does not have yet: the added rules that are new or changed, and the
// mirror filters the claim did not record before.
func (s state) introduced(rules []routes.Rule, claim routes.Claim) []RuleNeed {
	var out []RuleNeed
	for i, rule := range rules {
		name := rule.Name()
		if name == "" || !slices.Contains(claim.Rules, name) {
			continue
		}
		if live := routes.LocateRule(s.live.Rules, -1, name); live >= 0 && reflect.DeepEqual(map[string]any(s.live.Rules[live]), map[string]any(rule)) {
			continue
		}
		for _, n := range transform.Needs(s.live.Kind, rule) {
			out = append(out, RuleNeed{Rule: ruleLabel(i, name), Need: n})
		}
	}
	for _, f := range claim.MirrorFilters {
		if slices.ContainsFunc(s.claim.MirrorFilters, func(old routes.AddedFilter) bool { return reflect.DeepEqual(old, f) }) {
			continue
		}
		for _, n := range transform.Needs(s.live.Kind, routes.Rule{"filters": []any{f.Filter}}) {
			out = append(out, RuleNeed{Rule: ruleLabel(f.Rule, f.RuleName), Need: n})
		}
	}
	for _, f := range claim.RefFilters {
		if slices.ContainsFunc(s.claim.RefFilters, func(old routes.AddedRefFilter) bool { return reflect.DeepEqual(old, f) }) {
			continue
		}
		for _, n := range transform.Needs(s.live.Kind, routes.Rule{"backendRefs": []any{map[string]any{"filters": []any{f.Filter}}}}) {
			need := RuleNeed{Rule: ruleLabel(f.Rule, f.RuleName), Need: n}
			if !slices.ContainsFunc(out, func(o RuleNeed) bool { return o.Rule == need.Rule && o.Feature == need.Feature }) {
				out = append(out, need) // the cookies of stable and canary need the same
			}
		}
	}
	return out
}

func ruleLabel(i int, name string) string {
	if name != "" {
		return "rule " + strconv.Quote(name)
	}
	return fmt.Sprintf("rule %d", i)
}

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

// Gateway is one parent of a route as far as what it carries goes: the
// GatewayClass behind it (of the Gateway, or of the Gateway a ListenerSet
// belongs to) and the features that class publishes.
type Gateway struct {
	Parent routes.ParentRef
	// Class is the GatewayClass's name; "" when it is not known.
	Class string
	// Features is the class's status.supportedFeatures. Publishes says the
	// class lists any: a class that lists none (a gateway older than Gateway
	// API v1.4, or one that does not fill it) tells nothing.
	Features  []string
	Publishes bool
	// Unknown says why nothing is known of the parent's features (a Service
	// parent, a Gateway that is not there, reading it refused); "" when
	// Class is known.
	Unknown string
}

func (g Gateway) String() string {
	if g.Class == "" {
		return "parent " + g.Parent.String()
	}
	return fmt.Sprintf("GatewayClass %s (of parent %s)", g.Class, g.Parent)
}

// Unchecked is what a write carries to a gateway that does not say whether
// it supports it: written as before the check existed, and logged.
type Unchecked struct {
	Gateway Gateway
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

func (n RuleNeed) String() string { return fmt.Sprintf("%s needs %s", n.Rule, n.Need) }

func needList(needs []RuleNeed) string {
	parts := make([]string, len(needs))
	for i, n := range needs {
		parts[i] = n.String()
	}
	return strings.Join(parts, ", ")
}

// UnsupportedError says a call would write, for the Rollout, a rule that
// needs a feature a parent's GatewayClass says it lacks: such a gateway
// serves errors, or nothing, where the rule applies (Traefik answers 500 to
// every request a rule with an unsupported filter matches). Nothing is
// written.
type UnsupportedError struct {
	Route   routes.Ref
	Rollout string
	Gateway Gateway
	Missing []RuleNeed
}

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

// checkGateways refuses what the call adds (rules and mirror filters the
// claim records, new or changed) when a parent's class publishes its
// features and lacks one of them, and says which parents could not be
// checked. Weights and experiment backendRefs need nothing beyond core.
func (s state) checkGateways(rules []routes.Rule, claim routes.Claim) ([]Unchecked, error) {
	needs := s.introduced(rules, claim)
	if len(needs) == 0 {
		return nil, nil
	}
	var unchecked []Unchecked
	for _, g := range s.env.Gateways {
		if g.Unknown != "" || !g.Publishes {
			unchecked = append(unchecked, Unchecked{Gateway: g, Needs: needs})
			continue
		}
		var missing []RuleNeed
		for _, n := range needs {
			if !slices.Contains(g.Features, n.Feature) && !slices.Contains(s.env.AssumedFeatures, n.Feature) {
				missing = append(missing, n)
			}
		}
		if len(missing) > 0 {
			return nil, &UnsupportedError{Route: s.live.Ref, Rollout: s.env.Rollout, Gateway: g, Missing: missing}
		}
	}
	return unchecked, nil
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
	return out
}

func ruleLabel(i int, name string) string {
	if name != "" {
		return "rule " + strconv.Quote(name)
	}
	return fmt.Sprintf("rule %d", i)
}

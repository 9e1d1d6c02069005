package transform

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Sticky canary sessions (stickyCanary): while the canary has weight, in
// every weighted rule of an HTTPRoute the canary backendRef sets a cookie
// naming the canary revision and the stable backendRef one naming the stable
// revision (a backendRef-level ResponseHeaderModifier), and two rules the
// plugin adds next to the weighted rule send the requests that carry one of
// those cookies to that revision alone. A person stays where the weights
// first sent them until the cookie expires, so the share of people on the
// canary is the weight. A new canary revision has a new cookie value: the
// old one no longer matches and follows the weights.
//
// Like the other things the plugin adds, the filters (Claim.RefFilters) and
// the rules (Claim.Rules, Claim.StickyRules) are recorded in the Rollout's
// claim and removed exactly: the rules by name, each filter as the last
// equal one of its backendRef while it holds more than it did before.

// Sticky is what stickyCanary asks of a route in one SetWeight.
type Sticky struct {
	// Cookie is the cookie's name; MaxAge its Max-Age in seconds.
	Cookie string
	MaxAge int64
	// StableHash and CanaryHash name the revisions in the cookie's value
	// (the Rollout's status.stableRS and status.currentPodHash).
	StableHash, CanaryHash string
	// RuleBase names the rules the plugin adds: "<RuleBase>-canary" and
	// "<RuleBase>-stable" for the first weighted rule, "-<n>" after each for
	// the n-th further one.
	RuleBase string
}

// StickyInput is what SetSticky needs besides the route.
type StickyInput struct {
	// Sticky is nil when the route is to carry no cookie (no stickyCanary, or
	// the canary has no weight or all of it): what the claim records leaves.
	Sticky         *Sticky
	Stable, Canary routes.ObjectRef
	Targeting      Targeting
	// ClaimedRules and ClaimedFilters are the sticky rules and backendRef
	// filters the Rollout's claim records on the route.
	ClaimedRules   []string
	ClaimedFilters []routes.AddedRefFilter
	// AddedFilters and AddedRefFilters are the rule and backendRef filters
	// the plugin added for any Rollout: the rules it generates leave them out.
	AddedFilters, AddedRefFilters []map[string]any
}

// StickyResult is SetSticky's outcome on one route.
type StickyResult struct {
	Rules []routes.Rule
	// Claimed are the names of the sticky rules after the change; Filters
	// the backendRef filters.
	Claimed []string
	Filters []routes.AddedRefFilter
	Changes []routes.Change
}

// SetSticky returns a copy of rules (the route's, with the call's weights)
// carrying the cookie filters and rules in.Sticky asks for, and none of those
// the claim records that it no longer asks for.
func SetSticky(r routes.Route, rules []routes.Rule, in StickyInput) (StickyResult, error) {
	rules = routes.CopyRules(rules)
	weighted, wants, err := stickyWants(r, rules, in)
	if err != nil {
		return StickyResult{}, err
	}
	var res StickyResult
	if err := res.setFilters(r.Namespace, rules, in.ClaimedFilters, wants); err != nil {
		return StickyResult{}, err
	}
	generated, err := stickyRules(r, rules, weighted, in, res.Filters)
	if err != nil {
		return StickyResult{}, err
	}
	out, moved, changes, err := placeSticky(rules, generated, in.ClaimedRules)
	if err != nil {
		return StickyResult{}, err
	}
	for j := range res.Filters {
		if res.Filters[j].RuleName == "" {
			res.Filters[j].Rule = moved[res.Filters[j].Rule]
		}
	}
	for _, g := range generated {
		res.Claimed = append(res.Claimed, g.Name())
	}
	if err := checkLimits(r.Kind, out); err != nil {
		return StickyResult{}, fmt.Errorf("stickyCanary: %w", err)
	}
	res.Rules, res.Changes = out, append(res.Changes, changes...)
	return res, nil
}

// stickyWant is a cookie filter the call wants on the backendRef of backend
// in rule.
type stickyWant struct {
	rule    int
	backend routes.ObjectRef
	filter  map[string]any
}

// stickyWants returns the weighted rules and the cookie filters the call
// wants on them: one on the canary's backendRef and one on the stable's of
// each; none without in.Sticky.
func stickyWants(r routes.Route, rules []routes.Rule, in StickyInput) ([]int, []stickyWant, error) {
	if in.Sticky == nil {
		return nil, nil, nil
	}
	if r.Kind != routes.HTTPRoute {
		return nil, nil, fmt.Errorf("stickyCanary works on HTTPRoutes only, not on a %s: remove stickyCanary from the Rollout's plugin config or the %s from its routes", r.Kind, r.Kind)
	}
	weighted := WeightedRules(r.Namespace, rules, in.Stable, in.Canary, in.Targeting)
	var wants []stickyWant
	for _, i := range weighted {
		wants = append(wants,
			stickyWant{i, in.Canary, cookieFilter(in.Sticky, in.Sticky.canaryValue())},
			stickyWant{i, in.Stable, cookieFilter(in.Sticky, in.Sticky.stableValue())})
	}
	return weighted, wants, nil
}

// setFilters leaves in place the claimed cookie filters the call still
// wants, removes the others, and adds the wanted ones that are missing, in
// rules; res records the filters and the changes.
func (res *StickyResult) setFilters(namespace string, rules []routes.Rule, claimed []routes.AddedRefFilter, wants []stickyWant) error {
	kept := map[int]bool{}
	for _, f := range claimed {
		i := routes.LocateRule(rules, f.Rule, f.RuleName)
		k := slices.IndexFunc(wants, func(w stickyWant) bool {
			return w.rule == i && backendKey(w.backend) == f.Backend && sameJSON(w.filter, f.Filter)
		})
		if k >= 0 && !kept[k] && HasRefFilter(namespace, rules, f) {
			kept[k] = true // already there as the call wants it: leave it in place
			f.Rule, f.RuleName = i, rules[i].Name()
			res.Filters = append(res.Filters, f)
			continue
		}
		res.Changes = append(res.Changes, removeRefFilter(namespace, rules, f)...)
	}
	for k, w := range wants {
		if kept[k] {
			continue
		}
		ref := rules[w.rule].FirstRef(namespace, w.backend)
		if ref == nil {
			continue // a weighted rule holds both
		}
		if err := oneResponseFilter(ref, w.rule, w.backend); err != nil {
			return err
		}
		f := routes.AddedRefFilter{Rule: w.rule, RuleName: rules[w.rule].Name(), Backend: backendKey(w.backend),
			Filter: w.filter, Others: countFilters(routes.Rule(ref), w.filter)}
		filters, _ := ref["filters"].([]any)
		ref["filters"] = append(filters, runtime.DeepCopyJSONValue(w.filter))
		res.Filters = append(res.Filters, f)
		res.Changes = append(res.Changes, routes.Changef(routes.CookieAdded, "rule %d + sticky cookie on %s", w.rule, w.backend.Backend()))
	}
	return nil
}

// stickyRules generates the two cookie rules of each weighted rule: its
// matches with the canary's (the stable's) cookie, to the canary (stable)
// alone, without the filters the plugin added (those of filters included).
func stickyRules(r routes.Route, rules []routes.Rule, weighted []int, in StickyInput, filters []routes.AddedRefFilter) ([]routes.Rule, error) {
	var generated []routes.Rule
	stripped := append(slices.Clone(in.AddedRefFilters), wantedFilters(filters)...)
	for k, i := range weighted {
		for _, side := range []struct {
			target routes.ObjectRef
			suffix string
			value  string
		}{{in.Canary, "canary", in.Sticky.canaryValue()}, {in.Stable, "stable", in.Sticky.stableValue()}} {
			name := in.Sticky.RuleBase + "-" + side.suffix
			if k > 0 {
				name += fmt.Sprintf("-%d", k)
			}
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				return nil, fmt.Errorf("stickyCanary: the rule for the %s cookie would be named %q, which is not a rule name (a Gateway API SectionName): %s; shorten the Rollout's name", side.suffix, name, strings.Join(errs, "; "))
			}
			rule, err := stickyRule(r, rules[i], i, name, side.target, in.Sticky.Cookie, side.value, in.AddedFilters, stripped)
			if err != nil {
				return nil, err
			}
			generated = append(generated, rule)
		}
	}
	return generated, nil
}

// placeSticky puts the generated rules in place of the claimed rules of the
// same name, appends the new ones after every other rule (so header and
// mirror rules come first where Gateway API's precedence ties), and drops the
// claimed rules no longer generated. moved maps the index of each rule kept
// to its index in out.
func placeSticky(rules, generated []routes.Rule, claimed []string) ([]routes.Rule, map[int]int, []routes.Change, error) {
	byName := map[string]routes.Rule{}
	for _, g := range generated {
		byName[g.Name()] = g
	}
	out := make([]routes.Rule, 0, len(rules)+len(generated))
	moved := map[int]int{}
	placed := map[string]bool{}
	var changes []routes.Change
	for i, rule := range rules {
		n := rule.Name()
		g, wanted := byName[n]
		switch {
		case n != "" && slices.Contains(claimed, n) && wanted:
			if !sameJSON(map[string]any(rule), map[string]any(g)) {
				changes = append(changes, routes.RuleChange(routes.RuleChanged, n))
			}
			rule, placed[n] = g, true
		case n != "" && slices.Contains(claimed, n):
			changes = append(changes, routes.RuleChange(routes.RuleRemoved, n))
			continue
		case n != "" && wanted:
			return nil, nil, nil, fmt.Errorf("stickyCanary: the route already has a rule named %q that the plugin did not add for this Rollout; rename that rule", n)
		}
		moved[i] = len(out)
		out = append(out, rule)
	}
	for _, g := range generated {
		if !placed[g.Name()] {
			out = append(out, g)
			changes = append(changes, routes.RuleChange(routes.RuleAdded, g.Name()))
		}
	}
	return out, moved, changes, nil
}

// stickyRule is rule name: weighted rule i (source) with a match on the
// cookie added to each of its matches, its filters and other fields, sending
// to target alone (weight 1), without the filters the plugin added.
func stickyRule(r routes.Route, source routes.Rule, i int, name string, target routes.ObjectRef, cookie, value string, addedFilters, addedRefFilters []map[string]any) (routes.Rule, error) {
	rule := copyRuleWithout(source, "name", "backendRefs", "matches")
	withoutAddedFilters(rule, addedFilters)
	rule["name"] = name
	matches, _ := source["matches"].([]any)
	if len(matches) == 0 {
		matches = []any{map[string]any{}} // no matches matches every request
	}
	out := make([]any, len(matches))
	for j, m := range matches {
		mm, ok := runtime.DeepCopyJSONValue(m).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("rule %d match %d is %T, not an object", i, j, m)
		}
		if _, ok := mm["path"]; !ok {
			// The CRD default, written out so that the applied rule equals the stored one.
			mm["path"] = map[string]any{"type": "PathPrefix", "value": "/"}
		}
		headers, _ := mm["headers"].([]any)
		for _, h := range headers {
			if hn, _ := h.(map[string]any)["name"].(string); strings.EqualFold(hn, "Cookie") {
				return nil, fmt.Errorf("stickyCanary: rule %d already matches header Cookie in match %d, so the sticky rule cannot add its own match on it; match another header in rule %d, or remove stickyCanary", i, j, i)
			}
		}
		mm["headers"] = append(headers, cookieMatch(cookie, value))
		out[j] = mm
	}
	rule["matches"] = out
	ref, _ := source.CopyRef(r.Namespace, target)
	withoutAddedFilters(routes.Rule(ref), addedRefFilters)
	ref["weight"] = int64(1)
	rule["backendRefs"] = []any{map[string]any(ref)}
	return rule, nil
}

// oneResponseFilter refuses a backendRef that has a ResponseHeaderModifier
// already: Gateway API allows one per backendRef (its CEL refuses a second),
// and the plugin does not write into a filter of someone else's.
func oneResponseFilter(ref routes.BackendRef, i int, backend routes.ObjectRef) error {
	filters, _ := ref["filters"].([]any)
	for _, f := range filters {
		if m, _ := f.(map[string]any); m["type"] == "ResponseHeaderModifier" {
			return fmt.Errorf("stickyCanary: rule %d's backendRef to %s has a ResponseHeaderModifier filter already, and Gateway API allows one per backendRef, so the plugin cannot add its Set-Cookie; move that filter to the rule, or remove stickyCanary", i, backend.Backend())
		}
	}
	return nil
}

// cookieMatch is the header match of a request carrying cookie with value:
// anchored at both ends and open to other cookies around it, so that it
// means the same where a gateway matches the whole header value (Envoy's
// RE2) and where it searches it (Traefik, Go's regexp).
func cookieMatch(cookie, value string) map[string]any {
	return map[string]any{"name": "Cookie", "type": "RegularExpression",
		"value": `^(.*;\s*)?` + regexp.QuoteMeta(cookie+"="+value) + `(;.*)?$`}
}

// SetCookie is the Set-Cookie header value of the cookie.
func (s *Sticky) SetCookie(value string) string {
	return fmt.Sprintf("%s=%s; Path=/; Max-Age=%d; HttpOnly; SameSite=Lax", s.Cookie, value, s.MaxAge)
}

func (s *Sticky) canaryValue() string { return "canary-" + s.CanaryHash }
func (s *Sticky) stableValue() string { return "stable-" + s.StableHash }

// cookieFilter is the ResponseHeaderModifier that sets the cookie.
func cookieFilter(s *Sticky, value string) map[string]any {
	return map[string]any{"type": "ResponseHeaderModifier", "responseHeaderModifier": map[string]any{
		"add": []any{map[string]any{"name": "Set-Cookie", "value": s.SetCookie(value)}}}}
}

func wantedFilters(fs []routes.AddedRefFilter) []map[string]any {
	out := make([]map[string]any, len(fs))
	for i, f := range fs {
		out[i] = f.Filter
	}
	return out
}

// backendKey is "<namespace>/<name>" of the Service o routes to.
func backendKey(o routes.ObjectRef) string {
	b := o.Backend()
	return b.Namespace + "/" + b.Name
}

// refOf is the backendRef an added filter was added to, nil when it is gone.
func refOf(namespace string, rules []routes.Rule, f routes.AddedRefFilter) routes.BackendRef {
	i := routes.LocateRule(rules, f.Rule, f.RuleName)
	if i < 0 {
		return nil
	}
	ns, name, _ := strings.Cut(f.Backend, "/")
	return rules[i].FirstRef(namespace, routes.ServiceRef(ns, name))
}

// HasRefFilter says whether the rules still hold the backendRef filter the
// plugin added.
func HasRefFilter(namespace string, rules []routes.Rule, f routes.AddedRefFilter) bool {
	ref := refOf(namespace, rules, f)
	return ref != nil && countFilters(routes.Rule(ref), f.Filter) > f.Others
}

// RemoveRefFilters removes from a copy of the rules every backendRef filter
// claimed records, and says what it removed.
func RemoveRefFilters(namespace string, rules []routes.Rule, claimed []routes.AddedRefFilter) ([]routes.Rule, []routes.Change) {
	rules = routes.CopyRules(rules)
	var changes []routes.Change
	for _, f := range claimed {
		changes = append(changes, removeRefFilter(namespace, rules, f)...)
	}
	return rules, changes
}

func removeRefFilter(namespace string, rules []routes.Rule, f routes.AddedRefFilter) []routes.Change {
	ref := refOf(namespace, rules, f)
	if ref == nil || !removeLastFilter(routes.Rule(ref), f.Filter, f.Others) {
		return nil
	}
	return []routes.Change{routes.Changef(routes.CookieRemoved, "rule %d − sticky cookie on Service %s", routes.LocateRule(rules, f.Rule, f.RuleName), f.Backend)}
}

package transform

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Added rules are the rules the plugin adds for setHeaderRoute and
// setMirrorRoute steps. Each belongs to one managedRoutes entry of one
// Rollout (a name in spec.strategy.canary.trafficRouting.managedRoutes) and
// is identified only by its rule name, recorded in that Rollout's claim
// (Claim.Rules): the plugin never recognizes a rule by its shape, so a user's
// rule that happens to send only to the canary is never taken for one.
//
// The rules of a managedRoutes entry are named after it: the first "<name>",
// further ones "<name>-1", "<name>-2"… (a header route gets one rule per
// weighted rule it copies).
//
// Placement: added rules come after the user's rules, and a Rollout's own
// added rules in the order of its managedRoutes (placement.position), so
// re-adding one puts it back in its place. Gateway API gives precedence by
// match specificity across all rules and uses list order only to break ties,
// so the order only decides between rules whose matches tie. No user rule
// moves, so records kept by index (weights and experiment backends, on the
// user's weighted rules) stay valid. A header rule is its source rule's match
// plus at least one header match, so it always wins over its source rule. A
// rule whose match ties exactly with another rule's would leave one of the
// two unused; that is an error before the write.

// Gateway API limits on HTTPRoute and GRPCRoute, enforced by the CRDs.
const (
	maxRules          = 16
	maxMatchesPerRule = 64
	maxMatchesInRoute = 128
	maxHeadersInMatch = 16
	maxFiltersPerRule = 16
)

// RolloutServices is what a header or mirror step takes from the Rollout:
// its stable and canary Services, and its
// spec.strategy.canary.trafficRouting.managedRoutes names (a generated name
// "<name>-<n>" must not be one of them).
type RolloutServices struct {
	Stable, Canary routes.ObjectRef
	ManagedRoutes  []string
}

// RuleInput is what the header and mirror transforms need besides the route.
type RuleInput struct {
	RolloutServices
	// Claimed are the names of the rules the plugin added for this Rollout on
	// the route (its claim).
	Claimed []string
	// Targeting says which rules are weighted rules: not the added ones, and
	// only the one named by ruleName if the Rollout sets it.
	Targeting Targeting
	// AddedFilters are the mirror filters the plugin added to weighted rules
	// (any Rollout's); the rules generated from a weighted rule leave them out.
	AddedFilters []map[string]any
	// AddedRefFilters are the filters the plugin added to backendRefs of
	// weighted rules (stickyCanary's cookies); the backendRefs a generated
	// rule copies leave them out.
	AddedRefFilters []map[string]any
}

// RulesResult is a transform's outcome on one route.
type RulesResult struct {
	Rules []routes.Rule
	// Claimed are the names of the rules the plugin has added for the Rollout
	// on this route, after the change.
	Claimed []string
	Changes []routes.Change
}

// entryRuleNames are the names of the n rules of managedRoutes entry base.
func entryRuleNames(base string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = base
		if i > 0 {
			out[i] = base + "-" + strconv.Itoa(i)
		}
	}
	return out
}

// inEntry says whether rule name belongs to managedRoutes entry base: it is
// base, or base-<n> and not itself one of the Rollout's managedRoutes names.
func inEntry(name, base string, routeNames []string) bool {
	if name == base {
		return true
	}
	suffix, ok := strings.CutPrefix(name, base+"-")
	if !ok || suffix == "" || suffix[0] == '0' || strings.Trim(suffix, "0123456789") != "" {
		return false
	}
	return !slices.Contains(routeNames, name)
}

// SetHeaderRules returns the route with the header rules of managedRoutes
// entry name as the step asks: for every weighted rule (one holding both
// stable and canary, in route order), a rule with that rule's matches, each
// with the header matches added, its filters and other fields, and only the
// canary backendRef (weight 1, so it carries all matching requests whatever
// the canary's weight in the weighted rule, 0 included). No match removes the
// set.
func SetHeaderRules(r routes.Route, in RuleInput, name string, match []HeaderMatch) (RulesResult, error) {
	kept, res := withoutEntry(r, in, name)
	if len(match) == 0 {
		return res, nil
	}
	if !r.Kind.HasMatches() {
		return RulesResult{}, fmt.Errorf("a %s has no matches, so it cannot take header route %q", r.Kind, name)
	}
	headers, err := headerMatches(match)
	if err != nil {
		return RulesResult{}, fmt.Errorf("header route %q: %w", name, err)
	}
	sources := WeightedRules(r.Namespace, kept, in.Stable, in.Canary, in.Targeting)
	if len(sources) == 0 {
		return RulesResult{}, in.Targeting.noWeightedRule(r, kept, in.Stable, in.Canary)
	}
	names, err := setNames(name, len(sources), in.ManagedRoutes)
	if err != nil {
		return RulesResult{}, err
	}
	generated := make([]routes.Rule, len(sources))
	for k, i := range sources {
		rule, err := headerRule(r, in, kept[i], i, name, names[k], headers)
		if err != nil {
			return RulesResult{}, err
		}
		generated[k] = rule
	}
	return placement{route: r, in: in, base: name, what: "header route " + strconv.Quote(name),
		kept: kept, removal: res, generated: generated, names: names}.place()
}

// headerRule is rule ruleName of header route set: weighted rule i (source)
// with the header matches added to each of its matches, sending to the canary.
func headerRule(r routes.Route, in RuleInput, source routes.Rule, i int, set, ruleName string, headers []map[string]any) (routes.Rule, error) {
	canaryTarget := in.Canary
	rule := copyRuleWithout(source, "name", "backendRefs", "matches")
	withoutAddedFilters(rule, in.AddedFilters)
	rule["name"] = ruleName
	matches, _ := source["matches"].([]any)
	if len(matches) == 0 {
		// No matches matches every request.
		matches = []any{map[string]any{}}
	}
	out := make([]any, len(matches))
	for j, m := range matches {
		mm, ok := runtime.DeepCopyJSONValue(m).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("rule %d match %d is %T, not an object", i, j, m)
		}
		if _, ok := mm["path"]; !ok && r.Kind == routes.HTTPRoute {
			// The CRD default, written out so that the applied rule equals the stored one.
			mm["path"] = map[string]any{"type": "PathPrefix", "value": "/"}
		}
		have, _ := mm["headers"].([]any)
		for _, h := range headers {
			for _, e := range have {
				if en, _ := e.(map[string]any)["name"].(string); strings.EqualFold(en, h["name"].(string)) {
					return nil, fmt.Errorf("header route %q: rule %d already matches header %s in match %d, so the header rule cannot add its own match on it", set, i, en, j)
				}
			}
			have = append(have, runtime.DeepCopyJSONValue(h))
		}
		mm["headers"] = have
		out[j] = mm
	}
	rule["matches"] = out
	canary, ok := source.CopyRef(r.Namespace, canaryTarget)
	if !ok {
		return nil, fmt.Errorf("rule %d has no backendRef to %s", i, canaryTarget)
	}
	withoutAddedFilters(routes.Rule(canary), in.AddedRefFilters)
	canary["weight"] = int64(1)
	rule["backendRefs"] = []any{map[string]any(canary)}
	return rule, nil
}

// SetMirrorRule returns the route with the mirror rule of managedRoutes entry
// name as the step asks: a rule with the step's matches (method, path,
// headers) within the first weighted rule's (confine), that sends to that
// rule's stable backendRef, as that rule does (its filters and other fields
// copied, weight 1), and mirrors percent of the matching requests to the
// canary with a RequestMirror filter. No match, or percent 0, removes it; nil
// percent mirrors every request.
func SetMirrorRule(r routes.Route, in RuleInput, name string, match []RequestMatch, percent *int32) (RulesResult, error) {
	kept, res := withoutEntry(r, in, name)
	pct, err := mirrorPercent(name, percent)
	if err != nil {
		return RulesResult{}, err
	}
	if len(match) == 0 || pct == 0 {
		return res, nil
	}
	if !r.Kind.HasMatches() {
		return RulesResult{}, fmt.Errorf("a %s has no matches, so it cannot take mirror route %q", r.Kind, name)
	}
	if err := checkMirrorPercent(r, name, pct); err != nil {
		return RulesResult{}, err
	}
	matches, err := mirrorMatches(r.Kind, match)
	if err != nil {
		return RulesResult{}, fmt.Errorf("mirror route %q: %w", name, err)
	}
	sources := WeightedRules(r.Namespace, kept, in.Stable, in.Canary, in.Targeting)
	if len(sources) == 0 {
		return RulesResult{}, in.Targeting.noWeightedRule(r, kept, in.Stable, in.Canary)
	}
	if matches, err = confine(r, kept[sources[0]], sources[0], matches); err != nil {
		return RulesResult{}, fmt.Errorf("mirror route %q: %w", name, err)
	}
	names, err := setNames(name, 1, in.ManagedRoutes)
	if err != nil {
		return RulesResult{}, err
	}
	rule := mirrorRule(r, in, kept[sources[0]], names[0], matches, pct)
	return placement{route: r, in: in, base: name, what: "mirror route " + strconv.Quote(name),
		kept: kept, removal: res, generated: []routes.Rule{rule}, names: names}.place()
}

// mirrorRule is mirror rule ruleName: the weighted rule source with the
// step's matches (confined to its own), sending to its stable backendRef (weight 1) and mirroring
// pct % of the requests to its canary backendRef.
func mirrorRule(r routes.Route, in RuleInput, source routes.Rule, ruleName string, matches []any, pct int64) routes.Rule {
	stable, _ := source.CopyRef(r.Namespace, in.Stable)
	canary, _ := source.CopyRef(r.Namespace, in.Canary)
	withoutAddedFilters(routes.Rule(stable), in.AddedRefFilters)
	stable["weight"] = int64(1)
	rule := copyRuleWithout(source, "name", "backendRefs", "matches")
	withoutAddedFilters(rule, in.AddedFilters)
	rule["name"] = ruleName
	rule["matches"] = matches
	rule["backendRefs"] = []any{map[string]any(stable)}
	filters, _ := rule["filters"].([]any)
	rule["filters"] = append(filters, map[string]any{
		"type":          "RequestMirror",
		"requestMirror": requestMirror(mirrorBackend(canary), pct, r.Schema),
	})
	return rule
}

// mirrorBackend is the backend a RequestMirror filter names for the canary
// backendRef: its reference without weight and filters, the CRD's defaults
// written out so that the applied rule equals the stored one.
func mirrorBackend(canary routes.BackendRef) map[string]any {
	mirrorRef := map[string]any{}
	for _, k := range []string{"group", "kind", "name", "namespace", "port"} {
		if v, ok := canary[k]; ok {
			mirrorRef[k] = v
		}
	}
	if _, ok := mirrorRef["group"]; !ok {
		mirrorRef["group"] = ""
	}
	if _, ok := mirrorRef["kind"]; !ok {
		mirrorRef["kind"] = "Service"
	}
	return mirrorRef
}

// RemoveAddedRules returns the route without every rule the plugin recorded
// as added for the Rollout (claimed). A claimed rule that is already gone is
// fine; a rule with any other name, or none, stays.
func RemoveAddedRules(r routes.Route, claimed []string) RulesResult {
	var kept []routes.Rule
	var removed []string
	for _, rule := range routes.CopyRules(r.Rules) {
		if n := rule.Name(); n != "" && slices.Contains(claimed, n) {
			removed = append(removed, n)
			continue
		}
		kept = append(kept, rule)
	}
	res := RulesResult{Rules: kept}
	for _, n := range removed {
		res.Changes = append(res.Changes, routes.RuleChange(routes.RuleRemoved, n))
	}
	return res
}

// checkLimits refuses rules the CRD would refuse for their count (a
// LimitError): rules per route, matches per rule and per route, header
// matches per match, filters per rule; and duplicate rule names.
func checkLimits(kind routes.Kind, rules []routes.Rule) error {
	if !kind.HasMatches() {
		return nil
	}
	if len(rules) > maxRules {
		return limitf("the route would have %d rules; Gateway API allows at most %d rules per %s", len(rules), maxRules, kind)
	}
	total := 0
	seen := map[string]int{}
	for i, rule := range rules {
		if n := rule.Name(); n != "" {
			if j, dup := seen[n]; dup {
				return fmt.Errorf("rules %d and %d would both be named %q; rule names must be unique within a route", j, i, n)
			}
			seen[n] = i
		}
		matches, _ := rule["matches"].([]any)
		if len(matches) > maxMatchesPerRule {
			return limitf("rule %d would have %d matches; Gateway API allows at most %d per rule", i, len(matches), maxMatchesPerRule)
		}
		total += len(matches)
		for j, m := range matches {
			mm, _ := m.(map[string]any)
			if h, _ := mm["headers"].([]any); len(h) > maxHeadersInMatch {
				return limitf("rule %d match %d would have %d header matches; Gateway API allows at most %d per match", i, j, len(h), maxHeadersInMatch)
			}
		}
		if f, _ := rule["filters"].([]any); len(f) > maxFiltersPerRule {
			return limitf("rule %d would have %d filters; Gateway API allows at most %d per rule", i, len(f), maxFiltersPerRule)
		}
	}
	if total > maxMatchesInRoute {
		return limitf("the route would have %d matches in all; Gateway API allows at most %d per %s", total, maxMatchesInRoute, kind)
	}
	return nil
}

// LimitError says a route would exceed a limit the Gateway API CRDs enforce
// (rules, matches, filters or backendRefs); the apiserver would refuse it.
type LimitError struct{ Msg string }

// Reason is the Event reason of the error (package events).
func (e *LimitError) Reason() string { return "LimitExceeded" }

func (e *LimitError) Error() string { return e.Msg }

func limitf(format string, args ...any) error {
	return &LimitError{Msg: fmt.Sprintf(format, args...)}
}

// withoutEntry returns a copy of the rules without the claimed rules of
// managedRoutes entry base, and the result of that removal: the claimed names
// without the entry's (also recorded names whose rules are already gone).
func withoutEntry(r routes.Route, in RuleInput, base string) ([]routes.Rule, RulesResult) {
	kept := make([]routes.Rule, 0, len(r.Rules))
	var res RulesResult
	for _, rule := range routes.CopyRules(r.Rules) {
		if n := rule.Name(); n != "" && slices.Contains(in.Claimed, n) && inEntry(n, base, in.ManagedRoutes) {
			res.Changes = append(res.Changes, routes.RuleChange(routes.RuleRemoved, n))
			continue
		}
		kept = append(kept, rule)
	}
	for _, n := range in.Claimed {
		if !inEntry(n, base, in.ManagedRoutes) {
			res.Claimed = append(res.Claimed, n)
		}
	}
	res.Rules = kept
	return kept, res
}

// setNames are the names of a managedRoutes entry's n rules, refused when
// one is not a valid rule name or is the name of another of the Rollout's
// managedRoutes entries.
func setNames(base string, n int, managedRoutes []string) ([]string, error) {
	names := entryRuleNames(base, n)
	for i, name := range names {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, fmt.Errorf("managed route %q: %q is not a valid rule name (a Gateway API SectionName: lower case letters, digits, '-' and '.'): %s; rename the managed route", base, name, strings.Join(errs, "; "))
		}
		if i > 0 && slices.Contains(managedRoutes, name) {
			return nil, fmt.Errorf("managed route %q: its rule %d would be named %q, which is also a managed route of the Rollout; rename one of them", base, i+1, name)
		}
	}
	return names, nil
}

// placement is the new rule set of one managedRoutes entry, about to go on a
// route.
type placement struct {
	route routes.Route
	in    RuleInput
	// base is the managedRoutes entry; what names the step in errors.
	base, what string
	// kept are the route's rules without the entry's old rules; removal is
	// the outcome of taking those out.
	kept    []routes.Rule
	removal RulesResult
	// generated are the entry's new rules, named names.
	generated []routes.Rule
	names     []string
}

// place appends the generated rules to the rules kept, or, when the route
// already holds exactly those rules as the Rollout's, leaves it as it is (no
// reordering, so no write). It refuses names another owner uses, rules that
// would never be used, and rules past the CRD limits.
func (p placement) place() (RulesResult, error) {
	var mine []string
	for _, n := range p.in.Claimed {
		if inEntry(n, p.base, p.in.ManagedRoutes) {
			mine = append(mine, n)
		}
	}
	if slices.Equal(slices.Sorted(slices.Values(mine)), slices.Sorted(slices.Values(p.names))) &&
		reflect.DeepEqual(namedRules(p.route.Rules, p.names), p.generated) {
		return RulesResult{Rules: routes.CopyRules(p.route.Rules), Claimed: slices.Clone(p.in.Claimed)}, nil
	}
	for _, rule := range p.kept {
		if n := rule.Name(); slices.Contains(p.names, n) {
			return RulesResult{}, fmt.Errorf("%s: the route already has a rule named %q that the plugin did not add for this Rollout; rename that rule or the managed route", p.what, n)
		}
	}
	at := p.position()
	for _, rule := range p.generated {
		if err := shadowed(p.route.Kind, p.kept[:at], p.kept[at:], at+len(p.generated), rule); err != nil {
			return RulesResult{}, fmt.Errorf("%s: rule %q: %w", p.what, rule.Name(), err)
		}
	}
	rules := slices.Concat(p.kept[:at], p.generated, p.kept[at:])
	if err := checkLimits(p.route.Kind, rules); err != nil {
		return RulesResult{}, fmt.Errorf("%s: %w", p.what, err)
	}
	var changes []routes.Change
	removed := map[string]bool{}
	for _, c := range p.removal.Changes {
		if c.Kind == routes.RuleRemoved {
			removed[c.Rule] = true
		}
		if !slices.Contains(p.names, c.Rule) {
			changes = append(changes, c)
		}
	}
	for _, n := range p.names {
		if removed[n] {
			changes = append(changes, routes.RuleChange(routes.RuleChanged, n))
		} else {
			changes = append(changes, routes.RuleChange(routes.RuleAdded, n))
		}
	}
	return RulesResult{Rules: rules, Claimed: append(p.removal.Claimed, p.names...), Changes: changes}, nil
}

// position is where the entry's rules go among the rules kept: after the
// user's rules, and among the Rollout's own added rules in the order of its
// managedRoutes (as Argo Rollouts' Istio router orders them), so that a
// re-added entry comes back to its place.
func (p placement) position() int {
	last := -1 // the user's last rule
	for k, rule := range p.kept {
		if n := rule.Name(); n == "" || !p.in.Targeting.Added[n] {
			last = k
		}
	}
	order := p.in.managedRouteIndex(p.base)
	for k := last + 1; k < len(p.kept); k++ {
		n := p.kept[k].Name()
		if slices.Contains(p.in.Claimed, n) && p.in.managedRouteIndex(EntryOf(n, p.in.ManagedRoutes)) > order {
			return k
		}
	}
	return len(p.kept)
}

// managedRouteIndex is the entry's place in the Rollout's managedRoutes; an
// entry it no longer lists goes last.
func (in RuleInput) managedRouteIndex(base string) int {
	if i := slices.Index(in.ManagedRoutes, base); i >= 0 {
		return i
	}
	return len(in.ManagedRoutes)
}

// EntryOf is the managedRoutes entry a rule name belongs to (the entry
// itself, or <entry>-<n>), "" if none.
func EntryOf(name string, managedRoutes []string) string {
	for _, base := range managedRoutes {
		if inEntry(name, base, managedRoutes) {
			return base
		}
	}
	return ""
}

// namedRules are the rules with the given names, in the given order; nil if
// one is missing.
func namedRules(rules []routes.Rule, names []string) []routes.Rule {
	out := make([]routes.Rule, 0, len(names))
	for _, n := range names {
		i := slices.IndexFunc(rules, func(r routes.Rule) bool { return r.Name() == n })
		if i < 0 {
			return nil
		}
		out = append(out, rules[i])
	}
	return out
}

// shadowed refuses a new rule if one of its matches is exactly a match of
// another rule: Gateway API gives a tie to the rule that comes first, so
// either the new rule's match (if the other rule is earlier) or the other
// rule's (if it comes after the new rules; later starts at that rule's index
// once they are in) would never be used.
func shadowed(kind routes.Kind, earlier, later []routes.Rule, laterIndex int, rule routes.Rule) error {
	for j, m := range matchesOf(kind, rule) {
		for i, e := range earlier {
			if slices.ContainsFunc(matchesOf(kind, e), func(other map[string]any) bool { return reflect.DeepEqual(m, other) }) {
				return fmt.Errorf("its match %d is the same as a match of rule %d, which comes first and so takes every request the new rule would get; make the match more specific (a method, a header or a longer path)", j, i)
			}
		}
		for i, e := range later {
			if slices.ContainsFunc(matchesOf(kind, e), func(other map[string]any) bool { return reflect.DeepEqual(m, other) }) {
				return fmt.Errorf("its match %d is the same as a match of rule %d (%q), which would come after it and get none of those requests any more; make the match more specific (a method, a header or a longer path)", j, laterIndex+i, e.Name())
			}
		}
	}
	return nil
}

// matchesOf returns a rule's matches in a form to compare: header and query
// param matches sorted by name, empty lists dropped, no matches as the one
// match that matches everything.
func matchesOf(kind routes.Kind, rule routes.Rule) []map[string]any {
	raw, _ := rule["matches"].([]any)
	if len(raw) == 0 {
		if kind == routes.HTTPRoute {
			return []map[string]any{{"path": map[string]any{"type": "PathPrefix", "value": "/"}}}
		}
		return []map[string]any{{}}
	}
	out := make([]map[string]any, 0, len(raw))
	for _, m := range raw {
		mm, _ := m.(map[string]any)
		c := map[string]any{}
		for k, v := range mm {
			list, isList := v.([]any)
			switch {
			case isList && len(list) == 0:
			case isList:
				sorted := slices.Clone(list)
				slices.SortFunc(sorted, func(a, b any) int {
					an, _ := a.(map[string]any)["name"].(string)
					bn, _ := b.(map[string]any)["name"].(string)
					return strings.Compare(strings.ToLower(an), strings.ToLower(bn))
				})
				c[k] = sorted
			default:
				c[k] = v
			}
		}
		if kind == routes.HTTPRoute {
			if _, ok := c["path"]; !ok {
				c["path"] = map[string]any{"type": "PathPrefix", "value": "/"}
			}
		}
		out = append(out, c)
	}
	return out
}

// copyRuleWithout deep-copies a rule without the given fields.
func copyRuleWithout(rule routes.Rule, drop ...string) routes.Rule {
	out := routes.Rule{}
	for k, v := range rule {
		if !slices.Contains(drop, k) {
			out[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	return out
}

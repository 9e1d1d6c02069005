package desired

import (
	"fmt"
	"maps"
	"slices"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// A platform that swaps the argoproj-labs/gatewayAPI plugin for this one
// while rollouts are in progress leaves header rules that plugin added on
// the routes, which this plugin's claims do not list: they would stay for
// good. At a Rollout's first call on a route (no claim of its own there
// yet), the rules that plugin recorded for the Rollout's managedRoutes
// entries are adopted into the claim, so the Rollout's RemoveManagedRoutes
// takes them away as if this plugin had added them. That plugin kept no
// mirror rules: its SetMirrorRoute writes nothing.

// Predecessor is what the argoproj-labs/gatewayAPI plugin recorded of the
// header rules it added for the Rollout on one route.
type Predecessor struct {
	// Manager is that plugin's field manager: its binary's name, which
	// Argo Rollouts gives it from the name it is registered under (the last
	// element of "argoproj-labs/gatewayAPI": gatewayAPI), as its Updates
	// carry client-go's default user agent. Only rules that manager wrote
	// last, and nobody changed since, are adopted.
	Manager string
	// Entries are the Rollout's managedRoutes names; Canary its canary
	// Service: that plugin's header rules send to it alone.
	Entries []string
	Canary  routes.ObjectRef
	// Indexes are the indexes of the rules its ConfigMap lists for this
	// route, by managedRoutes entry (versions up to 0.12, whose rules have
	// no name); nil without one. Later versions name the rules after the
	// entry (<entry>, <entry>-<n>).
	Indexes map[string]int
	// ConfigMap names the ConfigMap Indexes come from, for the changes.
	ConfigMap string
	// RecordsRead says Indexes are what the ConfigMap holds for this route
	// (Decide asks for them while they are not).
	RecordsRead bool
}

// recordsRead says whether the route's records are read (none: nothing to read).
func (p *Predecessor) recordsRead() bool { return p == nil || p.RecordsRead }

// adopt is the claim of the rules that plugin added for the Rollout on the
// live route, with what a write says of them; none when the Rollout has a
// claim there already, or nothing of that plugin is found. A rule is that
// plugin's only when that plugin wrote the rules last (its manager owns
// spec.rules), the rule sends to the canary alone, no claim holds it, and
// it is named after one of the Rollout's entries or listed by index in that
// plugin's ConfigMap: a rule someone else wrote that only looks like it is
// never taken.
func (p *Predecessor) adopt(live routes.Route, claims routes.Claims, rollout string) (routes.Claim, []routes.Change) {
	if !p.wroteRules(live) || !claims[rollout].Empty() {
		return routes.Claim{}, nil
	}
	added := claims.AddedRules()
	var claim routes.Claim
	var changes []routes.Change
	take := func(name string, rule routes.Rule, unnamed bool) {
		claim.Rules = append(claim.Rules, name)
		if claim.RuleDigests == nil {
			claim.RuleDigests = map[string]string{}
		}
		claim.RuleDigests[name] = routes.RuleDigest(rule)
		how := "named after managedRoutes entry"
		if unnamed {
			claim.Unnamed = append(claim.Unnamed, name)
			how = "listed in ConfigMap " + p.ConfigMap + " for entry"
		}
		changes = append(changes, routes.Change{Kind: routes.RuleAdopted, Rule: name,
			Text: fmt.Sprintf("adopted rule %s: the argoproj-labs/gatewayAPI plugin added it (%s %s)", name, how, transform.EntryOf(name, p.Entries))})
	}
	for _, rule := range live.Rules {
		if n := rule.Name(); n != "" && !added[n] && p.sendsToCanary(live.Namespace, rule) && transform.EntryOf(n, p.Entries) != "" {
			take(n, rule, false)
		}
	}
	for _, entry := range slices.Sorted(maps.Keys(p.Indexes)) {
		i := p.Indexes[entry]
		if !slices.Contains(p.Entries, entry) || i < 0 || i >= len(live.Rules) || slices.Contains(claim.Rules, entry) {
			continue
		}
		rule := live.Rules[i]
		named := slices.ContainsFunc(live.Rules, func(r routes.Rule) bool { return r.Name() == entry })
		if _, hasName := rule["name"]; hasName || named || added[entry] || !p.sendsToCanary(live.Namespace, rule) {
			continue
		}
		take(entry, rule, true)
	}
	return claim, changes
}

// NeedsRecords says whether adopting on the live route needs the records of
// that plugin's ConfigMap: the Rollout has no claim there and the route
// holds a rule without a name that sends to the canary alone (a later
// version's rules are known by their names).
func (p *Predecessor) NeedsRecords(live routes.Route, rollout string) bool {
	if !p.wroteRules(live) {
		return false
	}
	claims, err := routes.ReadClaims(live)
	if err != nil || !claims[rollout].Empty() {
		return false
	}
	return slices.ContainsFunc(live.Rules, func(r routes.Rule) bool {
		_, named := r["name"]
		return !named && p.sendsToCanary(live.Namespace, r)
	})
}

// wroteRules says that plugin may have rules of the Rollout on the route:
// the Rollout has managedRoutes, the route's kind has matches, and that
// plugin's manager wrote spec.rules last.
func (p *Predecessor) wroteRules(live routes.Route) bool {
	return p != nil && len(p.Entries) > 0 && live.Kind.HasMatches() && live.ManagedFields.WroteRules(p.Manager)
}

// sendsToCanary says the rule's one backendRef is the canary Service.
func (p *Predecessor) sendsToCanary(namespace string, rule routes.Rule) bool {
	refs := rule.BackendRefs()
	return len(refs) == 1 && refs[0].Target(namespace).Backend() == p.Canary.Backend()
}

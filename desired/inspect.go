package desired

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// Inspection is what the plugin holds on a route, and what its next call
// would find there.
type Inspection struct {
	Route string `json:"route"`
	// Owners are the managedFields entries: who set which fields.
	Owners []Owner `json:"owners"`
	// RulesOwners own spec.rules (an atomic list: all of it).
	RulesOwners []string `json:"rulesOwners"`
	// PluginOwnsRules says whether the plugin still owns spec.rules: while it
	// does, nobody changed them since its last write, and no call can find a
	// conflict.
	PluginOwnsRules bool         `json:"pluginOwnsRules"`
	Claims          []ClaimState `json:"claims"`
	// Release says the plugin's next call on the route gives up its
	// ownership: no Rollout has anything left on it, and the plugin still owns
	// fields.
	Release bool `json:"releaseAtNextCall"`
}

// Owner is one managedFields entry.
type Owner struct {
	Manager    string   `json:"manager"`
	Operation  string   `json:"operation"`
	APIVersion string   `json:"apiVersion,omitempty"`
	Time       string   `json:"time,omitempty"`
	Fields     []string `json:"fields"`
}

// ClaimState is one Rollout's claim, held against the live route.
type ClaimState struct {
	Rollout string `json:"rollout"`
	// Cluster names the cluster of the Rollout that made the claim; "" for a
	// claim written before claims named it.
	Cluster      string        `json:"cluster,omitempty"`
	Active       bool          `json:"active"`
	CanaryWeight int64         `json:"canaryWeight"`
	Weights      []WeightState `json:"weights,omitempty"`
	Backends     []string      `json:"experimentBackends,omitempty"`
	Rules        []RuleState   `json:"rules,omitempty"`
	Filters      []string      `json:"mirrorFilters,omitempty"`
	// Cookies are stickyCanary's Set-Cookie filters on backendRefs.
	Cookies []string `json:"stickyCookies,omitempty"`
	// Reach says whether a Rollout of another namespace than the route's may
	// reach it, as its namespace's ReferenceGrants say (inspect fills it in):
	// "granted …" or "not granted …"; "" for a Rollout of its namespace.
	Reach string `json:"reach,omitempty"`
	// Changed lists what another owner changed since the plugin set it; with
	// the plugin no longer owning spec.rules, a call that would set any of it
	// again is a conflict.
	Changed []string `json:"changedByOthers,omitempty"`
}

// WeightState is one weight the plugin set and the weight now.
type WeightState struct {
	Rule    int    `json:"rule"`
	Service string `json:"service"`
	Set     int64  `json:"set"`
	// Now is -1 when the backendRef or its rule is gone.
	Now int64 `json:"now"`
}

// RuleState is one rule the plugin added.
type RuleState struct {
	Name    string `json:"name"`
	Present bool   `json:"present"`
	// Changed says its content is not what the plugin wrote.
	Changed bool `json:"changed"`
	// Unnamed says the rule is stored without a name (the CRD had none when
	// the plugin wrote it): known by its content, it is present only as
	// written.
	Unnamed bool `json:"unnamed,omitempty"`
}

// Inspect reads what the plugin (field manager fieldManager) holds on live.
func Inspect(live routes.Route, fieldManager string) (Inspection, error) {
	in := Inspection{Route: live.Ref.String(), PluginOwnsRules: live.ManagedFields.OwnsRules(fieldManager)}
	for _, e := range live.ManagedFields.Entries() {
		o := Owner{Manager: e.Manager, Operation: string(e.Operation), APIVersion: e.APIVersion}
		if e.Time != nil {
			o.Time = e.Time.UTC().Format("2006-01-02T15:04:05Z")
		}
		if e.FieldsV1 != nil {
			var f map[string]any
			if json.Unmarshal(e.FieldsV1.GetRawBytes(), &f) == nil {
				o.Fields = fieldPaths("", f)
			}
		}
		if slices.Contains(o.Fields, "spec.rules") {
			in.RulesOwners = append(in.RulesOwners, e.Manager)
		}
		in.Owners = append(in.Owners, o)
	}
	sort.Strings(in.RulesOwners)
	claims, err := routes.ReadClaims(live)
	if err != nil {
		return in, err
	}
	view, located, err := claims.Named(live)
	if err != nil {
		return in, err
	}
	for _, key := range slices.Sorted(maps.Keys(claims)) {
		in.Claims = append(in.Claims, claimState(view, key, claims[key], located, in.PluginOwnsRules))
	}
	in.Release = len(claims.Rollouts()) == 0 && live.ManagedFields.OwnsAnything(fieldManager)
	return in, nil
}

// claimState is what one claim holds on the route; live is the view in
// which the rules added without a name carry it (located).
func claimState(live routes.Route, key string, c routes.Claim, located map[string]bool, pluginOwnsRules bool) ClaimState {
	cs := ClaimState{Rollout: key, Cluster: c.Cluster, Active: c.Active(), CanaryWeight: c.CanaryWeight}
	for _, w := range c.Weights {
		now := weightOf(live.Namespace, live.Rules, w, serviceFromKey(w.Service))
		cs.Weights = append(cs.Weights, WeightState{Rule: w.Rule, Service: w.Service, Set: w.Weight, Now: now})
		if now != w.Weight {
			cs.Changed = append(cs.Changed, Drift{Rule: w.Rule, Service: w.Service, Set: w.Weight, Live: now, Desired: w.Weight}.changed())
		}
	}
	for _, b := range c.Backends {
		cs.Backends = append(cs.Backends, fmt.Sprintf("rule %d %s", b.Rule, b.Target()))
	}
	for _, name := range c.Rules {
		rs := RuleState{Name: name, Unnamed: slices.Contains(c.Unnamed, name)}
		if i := slices.IndexFunc(live.Rules, func(r routes.Rule) bool { return r.Name() == name }); i >= 0 {
			rs.Present = true
			rs.Changed = !located[name] && c.RuleDigests[name] != "" && routes.RuleDigest(live.Rules[i]) != c.RuleDigests[name]
		}
		if !rs.Present || rs.Changed {
			cs.Changed = append(cs.Changed, fmt.Sprintf("rule %q: %s since the plugin wrote it", name, map[bool]string{true: "changed", false: "removed"}[rs.Present]))
		}
		cs.Rules = append(cs.Rules, rs)
	}
	for _, f := range c.MirrorFilters {
		cs.Filters = append(cs.Filters, fmt.Sprintf("%q in rule %d", f.Entry, f.Rule))
		if !transform.HasFilter(live.Rules, f) {
			cs.Changed = append(cs.Changed, filterChanged(f))
		}
	}
	for _, f := range c.RefFilters {
		cs.Cookies = append(cs.Cookies, fmt.Sprintf("on Service %s in rule %d", f.Backend, f.Rule))
		if !transform.HasRefFilter(live.Namespace, live.Rules, f) {
			cs.Changed = append(cs.Changed, refFilterChanged(f))
		}
	}
	if pluginOwnsRules {
		cs.Changed = nil // the plugin's write is the last one to spec.rules
	}
	return cs
}

// fieldPaths flattens a managedFields field set into paths such as
// "spec.rules" or "metadata.labels.app".
func fieldPaths(prefix string, set map[string]any) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(set)) {
		if k == "." {
			continue
		}
		name, isField := strings.CutPrefix(k, "f:")
		path := prefix + "." + name
		if !isField {
			path = prefix + "[" + k + "]"
		}
		sub, _ := set[k].(map[string]any)
		if len(sub) == 0 || (len(sub) == 1 && sub["."] != nil) {
			out = append(out, strings.TrimPrefix(path, "."))
			continue
		}
		out = append(out, fieldPaths(path, sub)...)
	}
	return out
}

package desired

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
)

// The CRDs of the standard channel before Gateway API v1.4 have no rule
// names (v1.2 no mirror percentage either): the plugin writes the rules it
// adds without a name and knows them by their digest. The in-memory server
// fails a scenario that applies a field the CRD lacks, as the apiserver
// refuses it.

var (
	v12Standard = routes.Schema{LacksRuleNames: true, LacksMirrorPercent: true}
	v13Standard = routes.Schema{LacksRuleNames: true}
)

// headerRuleFor is the header rule the plugin adds for X-Canary: value on
// the weighted rule "/"; unnamed when name is "".
func headerRuleFor(value, name string) routes.Rule {
	r := routes.Rule{
		"matches": []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/"},
			"headers": []any{map[string]any{"name": "X-Canary", "type": "Exact", "value": value}}}},
		"backendRefs": []any{routestest.BackendOn("canary", 80, 1)},
	}
	if name != "" {
		r["name"] = name
	}
	return r
}

// mirrorRuleFor is the mirror rule for path /api: every request mirrored
// when pct is 0 and the CRD has no percentage.
func mirrorRuleFor(pct int64, name string) routes.Rule {
	body := map[string]any{"backendRef": map[string]any{"group": "", "kind": "Service", "name": "canary", "port": int64(80)}}
	if pct > 0 {
		body["percent"] = pct
	}
	r := routes.Rule{
		"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/api"}}},
		"backendRefs": []any{routestest.BackendOn("stable", 80, 1)},
		"filters":     []any{map[string]any{"type": "RequestMirror", "requestMirror": body}},
	}
	if name != "" {
		r["name"] = name
	}
	return r
}

func weightedRule(stable, canary int64) routes.Rule {
	return routestest.Rule("/", routestest.BackendOn("stable", 80, stable), routestest.BackendOn("canary", 80, canary))
}

// upgradeCRD installs other CRDs: the route stays as stored.
type upgradeCRD struct{ schema routes.Schema }

func (o upgradeCRD) do(s *server) (bool, error) {
	s.schema = o.schema
	return false, nil
}

// unnamedClaim checks what the claim of shop/demo records as stored without
// a name.
type unnamedClaim struct{ want []string }

func (o unnamedClaim) do(s *server) (bool, error) {
	s.t.Helper()
	claims, err := routes.ReadClaims(s.route)
	if err != nil {
		s.t.Fatal(err)
	}
	if diff := cmp.Diff(o.want, claims["shop/demo"].Unnamed); diff != "" {
		s.t.Errorf("claim's unnamed rules (-want +got):\n%s", diff)
	}
	return false, nil
}

// On v1.2 standard CRDs: header and mirror rules added without names, left
// alone by weight steps, kept in managedRoutes order, another owner's edit a
// conflict (and reverting it resolves it), removed exactly. The user's rule
// that looks exactly like a header rule the plugin would add (X-Canary:
// preview) is never taken for one.
func TestAddedRulesWithoutRuleNames(t *testing.T) {
	lookalike := headerRuleFor("preview", "")
	static := routestest.Rule("/static", routestest.BackendOn("static", 80, 1))
	user := func(stable, canary int64, added ...routes.Rule) []routes.Rule {
		return append([]routes.Rule{weightedRule(stable, canary), lookalike, static}, added...)
	}
	edited := headerRuleFor("yes", "")
	edited["backendRefs"] = []any{routestest.BackendOn("canary", 80, 7)}
	s := newServer(t, routes.HTTPRoute)
	s.schema = v12Standard
	on := expect{owners: plugins, labels: inProgress, claims: true}
	with := func(e expect, rules []routes.Rule, wrote bool) expect { e.rules, e.wrote = rules, wrote; return e }
	runSteps(t, s, []step{
		{create{kubectl, user(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(10)}, with(on, user(90, 10), true)},
		{call{c: header("X-Canary", "yes")}, with(on, user(90, 10, headerRuleFor("yes", "")), true)},
		{unnamedClaim{[]string{"beta"}}, on},
		{call{c: header("X-Canary", "yes")}, with(on, user(90, 10, headerRuleFor("yes", "")), false)},
		{call{c: setWeight(50)}, with(on, user(50, 50, headerRuleFor("yes", "")), true)},
		// Removed, then added after the mirror rule: back before it, in managedRoutes order.
		{call{c: header("", "")}, with(on, user(50, 50), true)},
		{call{c: mirror(100, "/api")}, with(on, user(50, 50, mirrorRuleFor(0, "")), true)},
		{call{c: header("X-Canary", "yes")}, with(on, user(50, 50, headerRuleFor("yes", ""), mirrorRuleFor(0, "")), true)},
		{unnamedClaim{[]string{"mirror", "beta"}}, on},
		// A percentage the CRD cannot carry: refused before any write.
		{call{c: mirror(50, "/api")}, expect{owners: plugins, labels: inProgress, claims: true, errAs: new(*routes.SchemaError),
			err: []string{`mirror route "mirror": mirroring 50% of the requests needs spec.rules[].filters[].requestMirror.percent`,
				"the installed HTTPRoute CRD (v1) does not have", "Gateway API v1.3", "mirror every request"}}},
		// Another owner edits the header rule: it is no longer the plugin's rule, and re-adding it is a conflict.
		{update{"kubectl-edit", func(r []routes.Rule) { r[3]["backendRefs"] = []any{routestest.BackendOn("canary", 80, 7)} }},
			expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true}},
		{call{c: header("X-Canary", "always")}, expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true, errAs: new(*ConflictError),
			rules: user(50, 50, edited, mirrorRuleFor(0, "")),
			err:   []string{`rule "beta" (written without a name, as the CRD has no rule names): changed or removed since the plugin added it`, "kubectl-edit (Update"}}},
		// Reverted: the rule is the plugin's again.
		{update{"kubectl-edit", func(r []routes.Rule) { r[3]["backendRefs"] = []any{routestest.BackendOn("canary", 80, 1)} }},
			expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true}},
		{call{c: header("X-Canary", "yes")}, expect{owners: []string{"kubectl-edit"}, labels: inProgress, claims: true}},
		{call{c: setWeight(60)}, with(on, user(40, 60, headerRuleFor("yes", ""), mirrorRuleFor(0, "")), true)},
		// ruleName needs rule names.
		{call{c: setWeight(60), env: func(e *Env) { e.RuleName = "split" }}, expect{owners: plugins, labels: inProgress, claims: true, errAs: new(*routes.SchemaError),
			err: []string{`ruleName "split" in the Rollout's plugin config needs rule names (spec.rules[].name)`, "Gateway API v1.4", "remove ruleName"}}},
		{call{c: RemoveManaged{}}, with(on, user(40, 60), true)},
		{unnamedClaim{nil}, on},
		{call{c: setWeight(0)}, expect{rules: user(100, 0), wrote: true}},
	})
}

// A header step whose rule would be byte for byte the user's lookalike rule
// is refused (the two would tie), never adopted.
func TestALookalikeRuleIsNotAdopted(t *testing.T) {
	lookalike := headerRuleFor("preview", "")
	s := newServer(t, routes.HTTPRoute)
	s.schema = v12Standard
	runSteps(t, s, []step{
		{create{kubectl, []routes.Rule{weightedRule(100, 0), lookalike}}, expect{owners: []string{kubectl}}},
		{call{c: header("X-Canary", "preview")}, expect{owners: []string{kubectl}, errAs: new(*InvalidError),
			err: []string{"is the same as a match of rule 1"}}},
		{call{c: RemoveManaged{}}, expect{owners: []string{kubectl}, rules: []routes.Rule{weightedRule(100, 0), lookalike}}},
	})
}

// Filter mode on v1.2 standard: the filter mirrors every request (no
// percentage), and leaves exactly.
func TestMirrorFilterWithoutPercentage(t *testing.T) {
	filterMode := func(e *Env) { e.MirrorMode = MirrorFilter }
	withFilter := weightedRule(90, 10)
	withFilter["filters"] = []any{map[string]any{"type": "RequestMirror", "requestMirror": map[string]any{
		"backendRef": map[string]any{"group": "", "kind": "Service", "name": "canary", "port": int64(80)}}}}
	s := newServer(t, routes.HTTPRoute)
	s.schema = v12Standard
	runSteps(t, s, []step{
		{create{kubectl, []routes.Rule{weightedRule(100, 0)}}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(10), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true}},
		{call{c: mirror(100, "/"), env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: []routes.Rule{withFilter}}},
		{call{c: mirror(30, "/"), env: filterMode}, expect{owners: plugins, labels: inProgress, claims: true, errAs: new(*routes.SchemaError),
			err: []string{"requestMirror.percent"}}},
		{call{c: RemoveManaged{}, env: filterMode}, expect{wrote: true, owners: plugins, labels: inProgress, claims: true, rules: []routes.Rule{weightedRule(90, 10)}}},
		{call{c: setWeight(0), env: filterMode}, expect{wrote: true, rules: []routes.Rule{weightedRule(100, 0)}}},
	})
}

// The CRDs upgraded mid-rollout (v1.3 → v1.4 standard: rules gain names):
// the rules added without a name stay so while the plugin leaves them as
// they are; one it writes anew gets its name; removal is exact either way.
func TestAddedRulesWhenTheCRDsGainNames(t *testing.T) {
	user := func(stable, canary int64, added ...routes.Rule) []routes.Rule {
		return append([]routes.Rule{weightedRule(stable, canary)}, added...)
	}
	s := newServer(t, routes.HTTPRoute)
	s.schema = v13Standard
	on := expect{owners: plugins, labels: inProgress, claims: true}
	with := func(rules []routes.Rule, wrote bool) expect { e := on; e.rules, e.wrote = rules, wrote; return e }
	runSteps(t, s, []step{
		{create{kubectl, user(100, 0)}, expect{owners: []string{kubectl}}},
		{call{c: setWeight(10)}, with(user(90, 10), true)},
		{call{c: header("X-Canary", "yes")}, with(user(90, 10, headerRuleFor("yes", "")), true)},
		{call{c: mirror(50, "/api")}, with(user(90, 10, headerRuleFor("yes", ""), mirrorRuleFor(50, "")), true)},
		{upgradeCRD{routes.Schema{}}, on},
		{call{c: setWeight(20)}, with(user(80, 20, headerRuleFor("yes", ""), mirrorRuleFor(50, "")), true)},
		{call{c: header("X-Canary", "yes")}, with(user(80, 20, headerRuleFor("yes", ""), mirrorRuleFor(50, "")), false)},
		{unnamedClaim{[]string{"beta", "mirror"}}, on},
		{call{c: header("X-Canary", "always")}, with(user(80, 20, headerRuleFor("always", "beta"), mirrorRuleFor(50, "")), true)},
		{unnamedClaim{[]string{"mirror"}}, on},
		{call{c: RemoveManaged{}}, with(user(80, 20), true)},
		{call{c: setWeight(0)}, expect{rules: user(100, 0), wrote: true}},
	})
}

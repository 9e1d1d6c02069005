package transform

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
)

// Rules here are in the form the apiserver serves them through unstructured:
// JSON objects as map[string]any, lists as []any, numbers as int64, server
// defaults (group "", kind Service, weight) included.

const (
	rolloutNS = "shop"
	otherNS   = "edge"
	baseline  = "web-5d4f8b9c7-2-0-baseline"
	expCanary = "web-5d4f8b9c7-2-0-canary"
)

var (
	stable = routes.ServiceRef(rolloutNS, "web-stable")
	canary = routes.ServiceRef(rolloutNS, "web-canary")
	// httpPorts is what Argo Rollouts gives an experiment Service whose pods
	// have one container port named http.
	httpPorts = []corev1.ServicePort{{Name: "http", Port: 8080}}
)

// nsRef is a backendRef with an explicit namespace.
func nsRef(namespace, name string, port, weight int64) map[string]any {
	m := routestest.BackendOn(name, port, weight)
	m["namespace"] = namespace
	return m
}

// rule is routestest.RuleWithUnmanaged (a filter and a timeout the plugin
// does not manage, so the tests show they pass through) with a name; name ""
// is an unnamed rule.
func rule(name, path string, backends ...map[string]any) routes.Rule {
	r := routestest.RuleWithUnmanaged(path, backends...)
	if name != "" {
		r["name"] = name
	}
	return r
}

func route(namespace string, rules []routes.Rule) routes.Route {
	return routes.Route{Ref: routes.Ref{Kind: routes.HTTPRoute, Namespace: namespace, Name: "web"}, Version: "v1", Rules: rules}
}

func dest(name string, weight int64) ExperimentDestination {
	return ExperimentDestination{Service: name, Weight: weight, Ports: httpPorts}
}

func input(ds ...ExperimentDestination) ExperimentInput {
	return ExperimentInput{
		RolloutNamespace: rolloutNS,
		Stable:           stable,
		Canary:           canary,
		StablePorts:      httpPorts,
		Destinations:     ds,
	}
}

// added is the record of a backendRef the plugin added in the Rollout's namespace.
func added(ruleIndex int, ruleName, name string) routes.AddedBackend {
	return routes.AddedBackend{Rule: ruleIndex, RuleName: ruleName, Kind: "Service", Namespace: rolloutNS, Name: name}
}

func withOthers(b routes.AddedBackend, n int) routes.AddedBackend {
	b.Others = n
	return b
}

func rules(rs ...routes.Rule) []routes.Rule { return rs }

// Edge cases where a recorded backendRef must be told from one that only
// looks like it: the plugin removes exactly its own and never another's.
func TestSetExperimentRefsTellsOwnRefsFromLookalikes(t *testing.T) {
	foreign := routestest.BackendOn(baseline, 8080, 7)
	for _, tc := range []struct {
		name        string
		rules       []routes.Rule
		claimed     []routes.AddedBackend
		in          ExperimentInput
		wantRules   []routes.Rule
		wantAdded   []routes.AddedBackend
		wantChanges []string
	}{
		{
			name:      "the plugin's ref is gone, a foreign one to the same Service stays on removal",
			rules:     rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 100), routestest.BackendOn("web-canary", 8080, 0), foreign)),
			claimed:   []routes.AddedBackend{withOthers(added(0, "", baseline), 1)},
			in:        input(),
			wantRules: rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 100), routestest.BackendOn("web-canary", 8080, 0), foreign)),
		},
		{
			name:        "the plugin's ref is gone, a foreign one to the same Service is not adopted when still wanted",
			rules:       rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0), foreign)),
			claimed:     []routes.AddedBackend{withOthers(added(0, "", baseline), 1)},
			in:          input(dest(baseline, 5)),
			wantRules:   rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0), foreign, routestest.BackendOn(baseline, 8080, 5))),
			wantAdded:   []routes.AddedBackend{withOthers(added(0, "", baseline), 1)},
			wantChanges: []string{"rule 0 + Service shop/" + baseline + " weight 5"},
		},
		{
			name: "two rules share a name: the recorded index picks the right one",
			rules: rules(rule("a", "/", routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0)),
				rule("a", "/x", routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5))),
			claimed:     []routes.AddedBackend{added(1, "a", baseline)},
			in:          input(),
			wantRules:   rules(rule("a", "/", routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0)), rule("a", "/x", routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0))),
			wantChanges: []string{"rule 1 − Service shop/" + baseline},
		},
		{
			name: "an unnamed rule inserted before the managed one: the plugin's ref is found where it went",
			rules: rules(rule("", "/preview", foreign),
				rule("", "/", routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5))),
			claimed:     []routes.AddedBackend{added(0, "", baseline)},
			in:          input(),
			wantRules:   rules(rule("", "/preview", foreign), rule("", "/", routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0))),
			wantChanges: []string{"rule 1 − Service shop/" + baseline},
		},
		{
			name:        "a rule named after the plugin added to it",
			rules:       rules(rule("main", "/", routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5))),
			claimed:     []routes.AddedBackend{added(0, "", baseline)},
			in:          input(),
			wantRules:   rules(rule("main", "/", routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0))),
			wantChanges: []string{"rule 0 − Service shop/" + baseline},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, added, changes, err := SetExperimentRefs(route(rolloutNS, tc.rules), tc.rules, tc.in, tc.claimed)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.wantRules, got); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantAdded, added, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantChanges, routes.ChangeTexts(changes), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetExperimentRefs(t *testing.T) {
	// A foreign backendRef: another team's Service, with its own weight.
	payments := routestest.BackendOn("payments", 9000, 3)
	// Foreign backendRefs to the very Service the experiment uses, and to a
	// Service with the same name in another namespace.
	foreignBaseline := routestest.BackendOn(baseline, 8080, 7)
	foreignBaselineElsewhere := nsRef("elsewhere", baseline, 8080, 4)

	tests := []struct {
		name        string
		routeNS     string
		rules       func() []routes.Rule // built fresh, so the input can be compared after the call
		in          ExperimentInput
		claimed     []routes.AddedBackend
		wantRules   []routes.Rule
		wantAdded   []routes.AddedBackend
		wantChanges []string
		wantErr     string
	}{
		{
			name: "GKE case: baseline 5 and canary 25 are appended to the one managed rule; other rules get nothing",
			rules: func() []routes.Rule {
				return rules(
					rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0)),
					rule("", "/admin", routestest.BackendOn("web-stable", 8080, 1)),
					rule("", "/pay", payments),
				)
			},
			in: input(dest(baseline, 5), dest(expCanary, 25)),
			wantRules: rules(
				rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5), routestest.BackendOn(expCanary, 8080, 25)),
				rule("", "/admin", routestest.BackendOn("web-stable", 8080, 1)),
				rule("", "/pay", payments),
			),
			wantAdded: []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary)},
			wantChanges: []string{
				"rule 0 + Service shop/" + baseline + " weight 5",
				"rule 0 + Service shop/" + expCanary + " weight 25",
			},
		},
		{
			name:    "route in another namespace: the new refs name the Rollout's namespace",
			routeNS: otherNS,
			rules: func() []routes.Rule {
				return rules(rule("", "/", nsRef(rolloutNS, "web-stable", 8080, 70), nsRef(rolloutNS, "web-canary", 8080, 0)))
			},
			in: input(dest(baseline, 5), dest(expCanary, 25)),
			wantRules: rules(rule("", "/",
				nsRef(rolloutNS, "web-stable", 8080, 70), nsRef(rolloutNS, "web-canary", 8080, 0),
				nsRef(rolloutNS, baseline, 8080, 5), nsRef(rolloutNS, expCanary, 8080, 25))),
			wantAdded: []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary)},
			wantChanges: []string{
				"rule 0 + Service shop/" + baseline + " weight 5",
				"rule 0 + Service shop/" + expCanary + " weight 25",
			},
		},
		{
			name:    "route in another namespace: a ref without namespace is the route's Service, not the experiment's",
			routeNS: otherNS,
			rules: func() []routes.Rule {
				return rules(rule("", "/",
					nsRef(rolloutNS, "web-stable", 8080, 70), nsRef(rolloutNS, "web-canary", 8080, 0),
					routestest.BackendOn(baseline, 8080, 7)))
			},
			in:      input(),
			claimed: []routes.AddedBackend{added(0, "", baseline)},
			wantRules: rules(rule("", "/",
				nsRef(rolloutNS, "web-stable", 8080, 70), nsRef(rolloutNS, "web-canary", 8080, 0),
				routestest.BackendOn(baseline, 8080, 7))),
		},
		{
			name: "a later call updates the weights of the recorded backends",
			rules: func() []routes.Rule {
				return rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 60), routestest.BackendOn("web-canary", 8080, 10), routestest.BackendOn(baseline, 8080, 5), routestest.BackendOn(expCanary, 8080, 25)))
			},
			in:        input(dest(baseline, 10), dest(expCanary, 20)),
			claimed:   []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary)},
			wantRules: rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 60), routestest.BackendOn("web-canary", 8080, 10), routestest.BackendOn(baseline, 8080, 10), routestest.BackendOn(expCanary, 8080, 20))),
			wantAdded: []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary)},
			wantChanges: []string{
				"rule 0 Service shop/" + baseline + " 5→10",
				"rule 0 Service shop/" + expCanary + " 25→20",
			},
		},
		{
			name: "same weights again: no change",
			rules: func() []routes.Rule {
				return rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5), routestest.BackendOn(expCanary, 8080, 25)))
			},
			in:        input(dest(baseline, 5), dest(expCanary, 25)),
			claimed:   []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary)},
			wantRules: rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5), routestest.BackendOn(expCanary, 8080, 25))),
			wantAdded: []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary)},
		},
		{
			name: "an empty destination list removes exactly the recorded backendRefs",
			rules: func() []routes.Rule {
				return rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 100), payments, routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5), routestest.BackendOn(expCanary, 8080, 25)))
			},
			in:        input(),
			claimed:   []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary)},
			wantRules: rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 100), payments, routestest.BackendOn("web-canary", 8080, 0))),
			wantChanges: []string{
				"rule 0 − Service shop/" + baseline,
				"rule 0 − Service shop/" + expCanary,
			},
		},
		{
			name: "one destination dropped: only its backendRef leaves, the other is kept",
			rules: func() []routes.Rule {
				return rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 75), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5), routestest.BackendOn(expCanary, 8080, 25)))
			},
			in:          input(dest(expCanary, 25)),
			claimed:     []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary)},
			wantRules:   rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 75), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(expCanary, 8080, 25))),
			wantAdded:   []routes.AddedBackend{added(0, "", expCanary)},
			wantChanges: []string{"rule 0 − Service shop/" + baseline},
		},
		{
			name: "foreign backendRefs to a Service named like the experiment's are kept when adding",
			rules: func() []routes.Rule {
				return rules(
					rule("", "/", routestest.BackendOn("web-stable", 8080, 70), foreignBaseline, foreignBaselineElsewhere, routestest.BackendOn("web-canary", 8080, 0)),
					rule("", "/preview", foreignBaseline),
				)
			},
			in: input(dest(baseline, 5)),
			wantRules: rules(
				rule("", "/", routestest.BackendOn("web-stable", 8080, 70), foreignBaseline, foreignBaselineElsewhere, routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5)),
				rule("", "/preview", foreignBaseline),
			),
			// One ref to the same Service was there before the plugin's: it is not the plugin's.
			wantAdded:   []routes.AddedBackend{withOthers(added(0, "", baseline), 1)},
			wantChanges: []string{"rule 0 + Service shop/" + baseline + " weight 5"},
		},
		{
			name: "foreign backendRefs to a Service named like the experiment's keep their weights on a weight change",
			rules: func() []routes.Rule {
				return rules(
					rule("", "/", routestest.BackendOn("web-stable", 8080, 70), foreignBaseline, foreignBaselineElsewhere, routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5)),
					rule("", "/preview", foreignBaseline),
				)
			},
			in:      input(dest(baseline, 9)),
			claimed: []routes.AddedBackend{added(0, "", baseline)},
			wantRules: rules(
				rule("", "/", routestest.BackendOn("web-stable", 8080, 70), foreignBaseline, foreignBaselineElsewhere, routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 9)),
				rule("", "/preview", foreignBaseline),
			),
			wantAdded:   []routes.AddedBackend{added(0, "", baseline)},
			wantChanges: []string{"rule 0 Service shop/" + baseline + " 5→9"},
		},
		{
			name: "foreign backendRefs to a Service named like the experiment's are kept when removing, in the same rule and in another",
			rules: func() []routes.Rule {
				return rules(
					rule("", "/", routestest.BackendOn("web-stable", 8080, 100), foreignBaseline, foreignBaselineElsewhere, routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5)),
					rule("", "/preview", foreignBaseline),
				)
			},
			in:      input(),
			claimed: []routes.AddedBackend{added(0, "", baseline)},
			wantRules: rules(
				rule("", "/", routestest.BackendOn("web-stable", 8080, 100), foreignBaseline, foreignBaselineElsewhere, routestest.BackendOn("web-canary", 8080, 0)),
				rule("", "/preview", foreignBaseline),
			),
			wantChanges: []string{"rule 0 − Service shop/" + baseline},
		},
		{
			name: "a recorded backendRef someone already removed is dropped from the record without error",
			rules: func() []routes.Rule {
				return rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 100), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(expCanary, 8080, 25)))
			},
			in:          input(),
			claimed:     []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary)},
			wantRules:   rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 100), routestest.BackendOn("web-canary", 8080, 0))),
			wantChanges: []string{"rule 0 − Service shop/" + expCanary},
		},
		{
			name: "a recorded backendRef whose rule is gone is dropped from the record without error",
			rules: func() []routes.Rule {
				return rules(rule("main", "/", routestest.BackendOn("web-stable", 8080, 100), routestest.BackendOn("web-canary", 8080, 0)))
			},
			in:        input(),
			claimed:   []routes.AddedBackend{added(1, "old", baseline)},
			wantRules: rules(rule("main", "/", routestest.BackendOn("web-stable", 8080, 100), routestest.BackendOn("web-canary", 8080, 0))),
		},
		{
			name: "a recorded backendRef someone removed while the experiment runs is added again",
			rules: func() []routes.Rule {
				return rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(expCanary, 8080, 25)))
			},
			in:          input(dest(baseline, 5), dest(expCanary, 25)),
			claimed:     []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary)},
			wantRules:   rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(expCanary, 8080, 25), routestest.BackendOn(baseline, 8080, 5))),
			wantAdded:   []routes.AddedBackend{added(0, "", expCanary), added(0, "", baseline)},
			wantChanges: []string{"rule 0 + Service shop/" + baseline + " weight 5"},
		},
		{
			name: "two managed rules each get the backends",
			rules: func() []routes.Rule {
				return rules(
					rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0)),
					rule("", "/static", payments),
					rule("", "/api", routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn("web-stable", 8080, 70)),
				)
			},
			in: input(dest(baseline, 5), dest(expCanary, 25)),
			wantRules: rules(
				rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5), routestest.BackendOn(expCanary, 8080, 25)),
				rule("", "/static", payments),
				rule("", "/api", routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn(baseline, 8080, 5), routestest.BackendOn(expCanary, 8080, 25)),
			),
			wantAdded: []routes.AddedBackend{added(0, "", baseline), added(0, "", expCanary), added(2, "", baseline), added(2, "", expCanary)},
			wantChanges: []string{
				"rule 0 + Service shop/" + baseline + " weight 5",
				"rule 0 + Service shop/" + expCanary + " weight 25",
				"rule 2 + Service shop/" + baseline + " weight 5",
				"rule 2 + Service shop/" + expCanary + " weight 25",
			},
		},
		{
			name: "a rule with the canary Service in another namespace is not managed",
			rules: func() []routes.Rule {
				return rules(
					rule("", "/", routestest.BackendOn("web-stable", 8080, 70), nsRef("elsewhere", "web-canary", 8080, 0)),
					rule("", "/api", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0)),
				)
			},
			in: input(dest(baseline, 5)),
			wantRules: rules(
				rule("", "/", routestest.BackendOn("web-stable", 8080, 70), nsRef("elsewhere", "web-canary", 8080, 0)),
				rule("", "/api", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5)),
			),
			wantAdded:   []routes.AddedBackend{added(1, "", baseline)},
			wantChanges: []string{"rule 1 + Service shop/" + baseline + " weight 5"},
		},
		{
			name: "a recorded backendRef in a rule that is no longer managed is removed",
			rules: func() []routes.Rule {
				return rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 100), routestest.BackendOn(baseline, 8080, 5)))
			},
			in:          input(dest(baseline, 5)),
			claimed:     []routes.AddedBackend{added(0, "", baseline)},
			wantRules:   rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 100))),
			wantChanges: []string{"rule 0 − Service shop/" + baseline},
		},
		{
			name: "named rules reordered: recorded backends are located by name and their indexes updated",
			rules: func() []routes.Rule {
				return rules(
					rule("api", "/api", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5)),
					rule("main", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5)),
				)
			},
			in:      input(dest(baseline, 30)),
			claimed: []routes.AddedBackend{added(0, "main", baseline), added(1, "api", baseline)},
			wantRules: rules(
				rule("api", "/api", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 30)),
				rule("main", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 30)),
			),
			wantAdded: []routes.AddedBackend{added(1, "main", baseline), added(0, "api", baseline)},
			wantChanges: []string{
				"rule 0 Service shop/" + baseline + " 5→30",
				"rule 1 Service shop/" + baseline + " 5→30",
			},
		},
		{
			name: "named rules reordered: removal takes the backends from the right rules",
			rules: func() []routes.Rule {
				return rules(
					rule("preview", "/preview", foreignBaseline),
					rule("main", "/", routestest.BackendOn("web-stable", 8080, 100), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5)),
				)
			},
			in:      input(),
			claimed: []routes.AddedBackend{added(0, "main", baseline)},
			wantRules: rules(
				rule("preview", "/preview", foreignBaseline),
				rule("main", "/", routestest.BackendOn("web-stable", 8080, 100), routestest.BackendOn("web-canary", 8080, 0)),
			),
			wantChanges: []string{"rule 1 − Service shop/" + baseline},
		},
		{
			name: "16 backendRefs in a rule is allowed",
			rules: func() []routes.Rule {
				return rules(rule("", "/", append([]map[string]any{routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0)}, foreign(13)...)...))
			},
			in:          input(dest(baseline, 5)),
			wantRules:   rules(rule("", "/", append(append([]map[string]any{routestest.BackendOn("web-stable", 8080, 95), routestest.BackendOn("web-canary", 8080, 0)}, foreign(13)...), routestest.BackendOn(baseline, 8080, 5))...)),
			wantAdded:   []routes.AddedBackend{added(0, "", baseline)},
			wantChanges: []string{"rule 0 + Service shop/" + baseline + " weight 5"},
		},
		{
			name: "more than 16 backendRefs in a rule is an error naming the rule",
			rules: func() []routes.Rule {
				return rules(
					rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0)),
					rule("", "/api", append([]map[string]any{routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0)}, foreign(13)...)...),
				)
			},
			in:      input(dest(baseline, 5), dest(expCanary, 25)),
			wantErr: "rule 1 would hold 17 backendRefs with the experiment's Services; Gateway API allows 16 per rule",
		},
		{
			name: "a destination equal to the stable Service is an error",
			rules: func() []routes.Rule {
				return rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0)))
			},
			in:      input(dest(baseline, 5), dest("web-stable", 25)),
			wantErr: "experiment Service shop/web-stable is the stable or canary Service; give the experiment its own Service",
		},
		{
			name: "a destination equal to the canary Service is an error",
			rules: func() []routes.Rule {
				return rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("web-canary", 8080, 0)))
			},
			in:      input(dest("web-canary", 5)),
			wantErr: "experiment Service shop/web-canary is the stable or canary Service; give the experiment its own Service",
		},
		{
			name: "no managed rule: nothing is added",
			rules: func() []routes.Rule {
				return rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 100)))
			},
			in:        input(dest(baseline, 5)),
			wantRules: rules(rule("", "/", routestest.BackendOn("web-stable", 8080, 100))),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := tt.routeNS
			if ns == "" {
				ns = rolloutNS
			}
			live := tt.rules()
			claimed := append([]routes.AddedBackend(nil), tt.claimed...)
			gotRules, gotAdded, gotChanges, err := SetExperimentRefs(route(ns, live), live, tt.in, claimed)

			if diff := cmp.Diff(tt.rules(), live); diff != "" {
				t.Errorf("SetExperimentRefs changed its input rules (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(tt.claimed, claimed); diff != "" {
				t.Errorf("SetExperimentRefs changed its input record (-before +after):\n%s", diff)
			}
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				if gotRules != nil || gotAdded != nil || gotChanges != nil {
					t.Errorf("on error SetExperimentRefs returned rules %v, record %v, changes %v; want nothing", gotRules, gotAdded, gotChanges)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tt.wantRules, gotRules); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAdded, gotAdded); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantChanges, routes.ChangeTexts(gotChanges)); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}

// foreign returns n backendRefs to other teams' Services.
func foreign(n int) []map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = routestest.BackendOn(fmt.Sprintf("team-%d", i), 8080, 1)
	}
	return out
}

// The GKE case of issue 3 as a sequence of calls, each fed the previous
// result and record: 70/5/25 during the experiment, then stable 100 (set by
// SetWeights) and the route exactly as it was.
func TestSetExperimentRefsExperimentLifecycle(t *testing.T) {
	before := func() []routes.Rule {
		return rules(
			rule("", "/", routestest.BackendOn("web-stable", 8080, 100), routestest.BackendOn("other-team", 8080, 0), routestest.BackendOn("web-canary", 8080, 0)),
			rule("", "/other", routestest.BackendOn(baseline, 8080, 1)),
		)
	}
	r := route(rolloutNS, before())
	withWeights := func(rs []routes.Rule, canaryWeight, reserved int64) []routes.Rule {
		t.Helper()
		out, _, err := SetWeights(route(rolloutNS, rs), Split{Stable: stable, Canary: canary, CanaryWeight: canaryWeight, MaxWeight: 100, Reserved: reserved}, Targeting{})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	// Experiment step: canary 0, baseline 5, experiment canary 25.
	in := input(dest(baseline, 5), dest(expCanary, 25))
	got, record, _, err := SetExperimentRefs(r, withWeights(r.Rules, 0, totalWeight(in.Destinations)), in, nil)
	if err != nil {
		t.Fatal(err)
	}
	during := rules(
		rule("", "/", routestest.BackendOn("web-stable", 8080, 70), routestest.BackendOn("other-team", 8080, 0), routestest.BackendOn("web-canary", 8080, 0), routestest.BackendOn(baseline, 8080, 5), routestest.BackendOn(expCanary, 8080, 25)),
		rule("", "/other", routestest.BackendOn(baseline, 8080, 1)),
	)
	if diff := cmp.Diff(during, got); diff != "" {
		t.Fatalf("during the experiment (-want +got):\n%s", diff)
	}

	// The controller repeats the call (a reconcile): nothing changes.
	again, record2, changes, err := SetExperimentRefs(route(rolloutNS, got), withWeights(got, 0, totalWeight(in.Destinations)), in, record)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(during, again); diff != "" || len(changes) > 0 {
		t.Fatalf("repeated call changed the route: %v (-want +got):\n%s", changes, diff)
	}
	if diff := cmp.Diff(record, record2); diff != "" {
		t.Fatalf("repeated call changed the record (-want +got):\n%s", diff)
	}

	// The experiment ends: an empty list, stable gets 100 again.
	after, record3, _, err := SetExperimentRefs(route(rolloutNS, again), withWeights(again, 0, 0), input(), record2)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before(), after); diff != "" {
		t.Fatalf("after the experiment (-want +got):\n%s", diff)
	}
	if len(record3) != 0 {
		t.Fatalf("record after the experiment = %v, want empty", record3)
	}
}

func TestSetExperimentRefsPortSelection(t *testing.T) {
	udp := func(name string, port int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolUDP}
	}
	tcp := func(name string, port int32) corev1.ServicePort {
		return corev1.ServicePort{Name: name, Port: port, Protocol: corev1.ProtocolTCP}
	}
	tests := []struct {
		name        string
		kind        routes.Kind // default HTTPRoute
		stablePort  int64       // port of the stable backendRef in the rule
		stablePorts []corev1.ServicePort
		ports       []corev1.ServicePort // the experiment Service's ports
		want        int64
		wantErr     string
	}{
		{
			name:        "the port with the stable backendRef's number",
			stablePort:  8080,
			stablePorts: []corev1.ServicePort{{Name: "http", Port: 8080}},
			ports:       []corev1.ServicePort{{Name: "metrics", Port: 9090}, {Name: "web", Port: 8080}},
			want:        8080,
		},
		{
			name:        "the port with the name the stable Service gives the stable backendRef's number",
			stablePort:  80,
			stablePorts: []corev1.ServicePort{{Name: "admin", Port: 81}, {Name: "http", Port: 80}},
			ports:       []corev1.ServicePort{{Name: "metrics", Port: 9090}, {Name: "http", Port: 8080}, {Name: "admin", Port: 8081}},
			want:        8080,
		},
		{
			name:        "a single-port Service's only port",
			stablePort:  80,
			stablePorts: []corev1.ServicePort{{Name: "http", Port: 80}},
			ports:       []corev1.ServicePort{{Name: "web", Port: 3000}},
			want:        3000,
		},
		{
			name:        "a single unnamed port",
			stablePort:  80,
			stablePorts: []corev1.ServicePort{{Port: 80}},
			ports:       []corev1.ServicePort{{Port: 3000}},
			want:        3000,
		},
		{
			name:        "ambiguous: an error listing the ports",
			stablePort:  80,
			stablePorts: []corev1.ServicePort{{Name: "http", Port: 80}},
			ports:       []corev1.ServicePort{{Name: "web", Port: 8080}, {Name: "metrics", Port: 9090}},
			wantErr: "rule 0: cannot tell which port of experiment Service shop/" + baseline +
				" to use: none has the stable backendRef's port 80 or its name, and it has 2 ports [web:8080, metrics:9090];" +
				" give the experiment Service the same port number or name as the stable Service",
		},
		{
			name:        "ambiguous with unnamed stable port: the name does not help",
			stablePort:  80,
			stablePorts: []corev1.ServicePort{{Port: 80}},
			ports:       []corev1.ServicePort{{Port: 8080}, {Name: "metrics", Port: 9090}},
			wantErr:     "[:8080, metrics:9090]",
		},
		// Argo Rollouts gives an experiment Service the protocols of its
		// pods' container ports: a DNS server has 53/UDP and 53/TCP.
		{
			name:        "a UDPRoute: a single UDP port",
			kind:        routes.UDPRoute,
			stablePort:  53,
			stablePorts: []corev1.ServicePort{udp("dns", 53)},
			ports:       []corev1.ServicePort{udp("dns", 5353)},
			want:        5353,
		},
		{
			name:        "a UDPRoute: the UDP port of the number's two names",
			kind:        routes.UDPRoute,
			stablePort:  53,
			stablePorts: []corev1.ServicePort{tcp("dns-tcp", 53), udp("dns", 53)},
			ports:       []corev1.ServicePort{tcp("dns-tcp", 5354), udp("dns", 5353)},
			want:        5353,
		},
		{
			name:        "a TCPRoute on the same Services: the TCP port of the number's two names",
			kind:        routes.TCPRoute,
			stablePort:  53,
			stablePorts: []corev1.ServicePort{udp("dns", 53), tcp("dns-tcp", 53)},
			ports:       []corev1.ServicePort{udp("dns", 5353), tcp("dns-tcp", 5354)},
			want:        5354,
		},
		{
			name:        "a UDPRoute: the Service's only UDP port beside a TCP metrics port",
			kind:        routes.UDPRoute,
			stablePort:  53,
			stablePorts: []corev1.ServicePort{udp("dns", 53)},
			ports:       []corev1.ServicePort{tcp("metrics", 9153), {Port: 5353, Protocol: corev1.ProtocolUDP}},
			want:        5353,
		},
		{
			name:        "an HTTPRoute: the Service's only TCP port (no protocol is TCP) beside a UDP port",
			stablePort:  80,
			stablePorts: []corev1.ServicePort{{Name: "http", Port: 80}},
			ports:       []corev1.ServicePort{udp("stats", 8125), {Name: "web", Port: 8080}},
			want:        8080,
		},
		{
			name:        "a UDPRoute: a single TCP port is still the only port",
			kind:        routes.UDPRoute,
			stablePort:  53,
			stablePorts: []corev1.ServicePort{udp("dns", 53)},
			ports:       []corev1.ServicePort{tcp("dns-tcp", 5354)},
			want:        5354,
		},
		{
			name:        "a UDPRoute: two UDP ports and nothing to choose by: an error listing them with their protocols",
			kind:        routes.UDPRoute,
			stablePort:  53,
			stablePorts: []corev1.ServicePort{udp("dns", 53)},
			ports:       []corev1.ServicePort{udp("a", 5353), udp("b", 5354), tcp("metrics", 9153)},
			wantErr:     "it has 3 ports [a:5353/UDP, b:5354/UDP, metrics:9153]",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := rules(rule("", "/", routestest.BackendOn("web-stable", tt.stablePort, 95), routestest.BackendOn("web-canary", tt.stablePort, 0)))
			in := input(ExperimentDestination{Service: baseline, Weight: 5, Ports: tt.ports})
			in.StablePorts = tt.stablePorts
			r := route(rolloutNS, live)
			if tt.kind != "" {
				r.Kind = tt.kind
			}
			got, _, _, err := SetExperimentRefs(r, live, in, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := rules(rule("", "/", routestest.BackendOn("web-stable", tt.stablePort, 95), routestest.BackendOn("web-canary", tt.stablePort, 0), routestest.BackendOn(baseline, tt.want, 5)))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("rules (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzSetExperimentRefsThenRemove: for generated small rule sets and weights, adding
// experiment destinations, changing their weights, and then applying an empty
// list with the returned record gives back exactly the original rules.
func FuzzSetExperimentRefsThenRemove(f *testing.F) {
	f.Add([]byte{0x00}, int64(5), int64(25), int64(10), false)
	f.Add([]byte{0x13, 0x27, 0x41, 0x05, 0x88, 0x31}, int64(5), int64(25), int64(0), true)
	f.Add([]byte{0xff, 0xfe, 0xfd, 0xfc, 0xfb, 0xfa, 0xf9, 0xf8, 0xf7, 0xf6}, int64(0), int64(1000000), int64(3), false)
	f.Add([]byte{0x02, 0x0a, 0x0f, 0x11, 0x33, 0x55, 0x77, 0x99}, int64(1), int64(1), int64(1), true)
	f.Fuzz(func(t *testing.T, shape []byte, w1, w2, w3 int64, crossNamespace bool) {
		if len(shape) > 64 {
			shape = shape[:64]
		}
		// Weights as Argo Rollouts sends them: 0..1,000,000 (Gateway API's range).
		w1, w2, w3 = weight(w1), weight(w2), weight(w3)
		ns := rolloutNS
		if crossNamespace {
			ns = otherNS
		}
		original := genRules(shape, crossNamespace)
		r := route(ns, original())

		dests := []ExperimentDestination{dest(baseline, w1), dest(expCanary, w2)}
		if w3%2 == 0 {
			dests = append(dests, ExperimentDestination{Service: "web-5d4f8b9c7-2-0-extra", Weight: w3, Ports: []corev1.ServicePort{{Name: "http", Port: 8080}, {Name: "metrics", Port: 9090}}})
		}
		first, record, _, err := SetExperimentRefs(r, r.Rules, input(dests...), nil)
		if err != nil {
			if strings.Contains(err.Error(), "backendRefs") {
				return // over 16 in a rule: refused before any write
			}
			t.Fatalf("SetExperimentRefs: %v", err)
		}
		if diff := cmp.Diff(original(), r.Rules); diff != "" {
			t.Fatalf("SetExperimentRefs changed its input (-before +after):\n%s", diff)
		}
		// A later step changes the weights.
		for i := range dests {
			dests[i].Weight = dests[i].Weight/2 + int64(i)
		}
		second, record, _, err := SetExperimentRefs(route(ns, first), first, input(dests...), record)
		if err != nil {
			t.Fatalf("SetExperimentRefs with new weights: %v", err)
		}
		back, record, _, err := SetExperimentRefs(route(ns, second), second, input(), record)
		if err != nil {
			t.Fatalf("SetExperimentRefs of an empty list: %v", err)
		}
		if diff := cmp.Diff(original(), back); diff != "" {
			t.Fatalf("after adding and removing the experiment (-original +got):\n%s", diff)
		}
		if len(record) != 0 {
			t.Fatalf("record after removal = %v, want empty", record)
		}
	})
}

func weight(w int64) int64 {
	if w < 0 {
		w = -(w + 1)
	}
	return w % 1000001
}

// genRules builds 1..4 rules from shape: each rule named or not (names
// unique), holding some of stable, canary, foreign refs and foreign refs to
// the experiment Services, in an order and with weights taken from shape.
func genRules(shape []byte, crossNamespace bool) func() []routes.Rule {
	next := func() byte {
		if len(shape) == 0 {
			return 0
		}
		b := shape[0]
		shape = shape[1:]
		return b
	}
	svc := func(name string, weight int64) map[string]any {
		if crossNamespace {
			return nsRef(rolloutNS, name, 8080, weight)
		}
		return routestest.BackendOn(name, 8080, weight)
	}
	n := int(next()%4) + 1
	var out []routes.Rule
	for i := 0; i < n; i++ {
		flags := next()
		name := ""
		if flags&1 != 0 {
			name = fmt.Sprintf("rule-%d", i)
		}
		var refs []map[string]any
		if flags&2 != 0 || i == 0 {
			refs = append(refs, svc("web-stable", int64(next())))
		}
		if flags&4 != 0 || i == 0 {
			refs = append(refs, svc("web-canary", int64(next())))
		}
		if flags&8 != 0 {
			refs = append(refs, routestest.BackendOn("payments", 9000, int64(next())))
		}
		if flags&16 != 0 {
			// Another team's ref to the very Service the experiment uses.
			refs = append(refs, svc(baseline, int64(next())))
		}
		if flags&32 != 0 {
			refs = append(refs, nsRef("elsewhere", expCanary, 8080, int64(next())))
		}
		for j := 0; j < int(flags>>6); j++ {
			refs = append(refs, routestest.BackendOn(fmt.Sprintf("team-%d", j), 8080, 1))
		}
		// Rotate so stable and canary are not always first.
		if len(refs) > 0 {
			k := int(next()) % len(refs)
			refs = append(refs[k:], refs[:k]...)
		}
		out = append(out, rule(name, fmt.Sprintf("/p%d", i), refs...))
	}
	return func() []routes.Rule { return routes.CopyRules(out) }
}

// importRef is a backendRef to the ServiceImport of group for a Service, as
// served.
func importRef(group, name string, port, weight int64) map[string]any {
	return map[string]any{"group": group, "kind": "ServiceImport", "name": name, "port": port, "weight": weight}
}

// On a route that reaches stable and canary through ServiceImports (GKE's
// multi-cluster Gateways, the Multi-Cluster Services API), an experiment's
// Services are added as ServiceImports of the canary's group, recorded as
// such, and removed exactly; a Service of the same name someone else put in
// the rule stays.
func TestSetExperimentRefsOnServiceImportRoutes(t *testing.T) {
	const gke = "net.gke.io"
	imported := func(ruleIndex int, ruleName, name string) routes.AddedBackend {
		b := added(ruleIndex, ruleName, name)
		b.Group, b.Kind = gke, "ServiceImport"
		return b
	}
	live := rules(
		rule("", "/", importRef(gke, "web-stable", 8080, 80), importRef(gke, "web-canary", 8080, 20)),
		rule("", "/mixed", routestest.BackendOn("web-stable", 8080, 80), importRef("multicluster.x-k8s.io", "web-canary", 8080, 20)),
		rule("", "/local", routestest.BackendOn("web-stable", 8080, 80), routestest.BackendOn("web-canary", 8080, 20)),
	)
	in := input(dest(baseline, 5), dest(expCanary, 5))
	got, record, changes, err := SetExperimentRefs(route(rolloutNS, live), live, in, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := rules(
		rule("", "/", importRef(gke, "web-stable", 8080, 80), importRef(gke, "web-canary", 8080, 20), importRef(gke, baseline, 8080, 5), importRef(gke, expCanary, 8080, 5)),
		rule("", "/mixed", routestest.BackendOn("web-stable", 8080, 80), importRef("multicluster.x-k8s.io", "web-canary", 8080, 20),
			importRef("multicluster.x-k8s.io", baseline, 8080, 5), importRef("multicluster.x-k8s.io", expCanary, 8080, 5)),
		rule("", "/local", routestest.BackendOn("web-stable", 8080, 80), routestest.BackendOn("web-canary", 8080, 20), routestest.BackendOn(baseline, 8080, 5), routestest.BackendOn(expCanary, 8080, 5)),
	)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	mcs := func(name string) routes.AddedBackend {
		b := added(1, "", name)
		b.Group, b.Kind = "multicluster.x-k8s.io", "ServiceImport"
		return b
	}
	wantRecord := []routes.AddedBackend{imported(0, "", baseline), imported(0, "", expCanary), mcs(baseline), mcs(expCanary), added(2, "", baseline), added(2, "", expCanary)}
	if diff := cmp.Diff(wantRecord, record); diff != "" {
		t.Errorf("record (-want +got):\n%s", diff)
	}
	wantChanges := []string{
		"rule 0 + ServiceImport.net.gke.io shop/" + baseline + " weight 5", "rule 0 + ServiceImport.net.gke.io shop/" + expCanary + " weight 5",
		"rule 1 + ServiceImport.multicluster.x-k8s.io shop/" + baseline + " weight 5", "rule 1 + ServiceImport.multicluster.x-k8s.io shop/" + expCanary + " weight 5",
		"rule 2 + Service shop/" + baseline + " weight 5", "rule 2 + Service shop/" + expCanary + " weight 5",
	}
	if diff := cmp.Diff(wantChanges, routes.ChangeTexts(changes)); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}

	// A weight changes in place; then the experiment ends while another
	// owner has added a Service of the experiment's name to rule 0, after
	// the plugin's ServiceImport: only the plugin's ServiceImports leave.
	in = input(dest(baseline, 10), dest(expCanary, 5))
	got, record, changes, err = SetExperimentRefs(route(rolloutNS, got), got, in, record)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(wantRecord, record); diff != "" {
		t.Errorf("record after the weight change (-want +got):\n%s", diff)
	}
	if want := []string{"rule 0 ServiceImport.net.gke.io shop/" + baseline + " 5→10", "rule 1 ServiceImport.multicluster.x-k8s.io shop/" + baseline + " 5→10",
		"rule 2 Service shop/" + baseline + " 5→10"}; !cmp.Equal(want, routes.ChangeTexts(changes)) {
		t.Errorf("changes after the weight change: %q, want %q", routes.ChangeTexts(changes), want)
	}
	foreign := routestest.BackendOn(baseline, 8080, 1)
	got[0]["backendRefs"] = append(got[0]["backendRefs"].([]any), foreign)
	got, record, _, err = SetExperimentRefs(route(rolloutNS, got), got, input(), record)
	if err != nil {
		t.Fatal(err)
	}
	want = rules(
		rule("", "/", importRef(gke, "web-stable", 8080, 80), importRef(gke, "web-canary", 8080, 20), foreign),
		live[1], live[2],
	)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules after the experiment (-want +got):\n%s", diff)
	}
	if len(record) != 0 {
		t.Errorf("record after the experiment: %v, want none", record)
	}
}

// totalWeight is the total weight of the destinations.
func totalWeight(ds []ExperimentDestination) int64 {
	var sum int64
	for _, d := range ds {
		sum += d.Weight
	}
	return sum
}

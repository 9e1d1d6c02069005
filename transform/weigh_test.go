package transform

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes/routestest"
)

// Weigh as one SetWeight call does it on one route: scenarios, each the
// whole result.
func TestWeigh(t *testing.T) {
	// A header rule the plugin added holds both Services: never weighed,
	// never recorded.
	header := rule("canary-header", "/", routestest.Backend("web-stable", 0), routestest.Backend("web-canary", 100))
	targeting := Targeting{Added: map[string]bool{"canary-header": true}}
	// The canary backendRef addCanaryBackendRef added to rule 0, the stable
	// one's weight 1 before.
	addedCanary := routes.AddedCanary{StableWeight: 1, AddedBackend: routes.AddedBackend{Rule: 0, Kind: "Service", Namespace: rolloutNS, Name: "web-canary"}}
	weightNote := func(text string) routes.Change { return routes.Change{Kind: routes.WeightChanged, Text: text} }

	tests := []struct {
		name string
		in   func() WeighInput // built fresh, so the input can be compared after the call
		want WeighResult
	}{
		{
			name: "a plain weight change: the weighted rule at 30, its notes and recorded weights; the added rule as it was",
			in: func() WeighInput {
				return WeighInput{
					Live:       route(rolloutNS, rules(rule("", "/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)), header)),
					Split:      Split{Stable: stable, Canary: canary, CanaryWeight: 30, MaxWeight: 100},
					Experiment: input(),
					Targeting:  targeting,
				}
			},
			want: WeighResult{
				Rules: rules(rule("", "/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30)), header),
				Changes: []routes.Change{
					weightNote("rule 0 Service shop/web-stable 100→70"),
					weightNote("rule 0 Service shop/web-canary 0→30"),
				},
				Weights: []routes.RecordedWeight{
					{Rule: 0, Service: "shop/web-stable", Weight: 70},
					{Rule: 0, Service: "shop/web-canary", Weight: 30},
				},
			},
		},
		{
			name: "a sticky step follows: the same rules and notes, the weights left to record after it",
			in: func() WeighInput {
				return WeighInput{
					Live:       route(rolloutNS, rules(rule("", "/", routestest.Backend("web-stable", 100), routestest.Backend("web-canary", 0)))),
					Split:      Split{Stable: stable, Canary: canary, CanaryWeight: 30, MaxWeight: 100},
					Experiment: input(),
					StickyNext: true,
				}
			},
			want: WeighResult{
				Rules: rules(rule("", "/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30))),
				Changes: []routes.Change{
					weightNote("rule 0 Service shop/web-stable 100→70"),
					weightNote("rule 0 Service shop/web-canary 0→30"),
				},
			},
		},
		{
			name: "an experiment Service added at 10: stable gets what the canary and it leave, all three recorded",
			in: func() WeighInput {
				return WeighInput{
					Live:       route(rolloutNS, rules(rule("", "/", routestest.Backend("web-stable", 80), routestest.Backend("web-canary", 0)))),
					Split:      Split{Stable: stable, Canary: canary, CanaryWeight: 20, MaxWeight: 100, Reserved: 10},
					Experiment: input(dest(baseline, 10)),
				}
			},
			want: WeighResult{
				Rules:    rules(rule("", "/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 20), routestest.Backend(baseline, 10))),
				Backends: []routes.AddedBackend{added(0, "", baseline)},
				Changes: []routes.Change{
					weightNote("rule 0 Service shop/web-stable 80→70"),
					weightNote("rule 0 Service shop/web-canary 0→20"),
					{Kind: routes.BackendAdded, Text: "rule 0 + Service shop/" + baseline + " weight 10"},
				},
				Weights: []routes.RecordedWeight{
					{Rule: 0, Service: "shop/web-stable", Weight: 70},
					{Rule: 0, Service: "shop/web-canary", Weight: 20},
					{Rule: 0, Service: "shop/" + baseline, Weight: 10},
				},
			},
		},
		{
			name: "addCanaryBackendRef on a rule that holds stable alone: the canary added, then weighed, and recorded",
			in: func() WeighInput {
				return WeighInput{
					Live:                route(rolloutNS, rules(rule("", "/", routestest.Backend("web-stable", 1)))),
					Split:               Split{Stable: stable, Canary: canary, CanaryWeight: 30, MaxWeight: 100},
					Experiment:          input(),
					AddCanaryBackendRef: true,
				}
			},
			want: WeighResult{
				Rules:      rules(rule("", "/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30))),
				CanaryRefs: []routes.AddedCanary{addedCanary},
				Changes: []routes.Change{
					{Kind: routes.BackendAdded, Text: "rule 0 + Service shop/web-canary (addCanaryBackendRef)"},
					weightNote("rule 0 Service shop/web-stable 1→70"),
					weightNote("rule 0 Service shop/web-canary 0→30"),
				},
				Weights: []routes.RecordedWeight{
					{Rule: 0, Service: "shop/web-stable", Weight: 70},
					{Rule: 0, Service: "shop/web-canary", Weight: 30},
				},
			},
		},
		{
			name: "the call that ends the rollout with addCanaryBackendRef: the canary it added goes, stable back at 1, nothing left to weigh or record",
			in: func() WeighInput {
				return WeighInput{
					Live:                route(rolloutNS, rules(rule("", "/", routestest.Backend("web-stable", 70), routestest.Backend("web-canary", 30)))),
					Split:               Split{Stable: stable, Canary: canary, CanaryWeight: 0, MaxWeight: 100},
					Experiment:          input(),
					CanaryRefs:          []routes.AddedCanary{addedCanary},
					Ends:                true,
					AddCanaryBackendRef: true,
				}
			},
			want: WeighResult{
				Rules: rules(rule("", "/", routestest.Backend("web-stable", 1))),
				Changes: []routes.Change{
					{Kind: routes.BackendRemoved, Text: "rule 0 − Service shop/web-canary (addCanaryBackendRef)"},
					weightNote("rule 0 Service shop/web-stable 70→1"),
				},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in()
			got, err := Weigh(in)
			if err != nil {
				t.Fatalf("Weigh: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Weigh (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.in(), in); diff != "" {
				t.Errorf("Weigh changed its input (-before +after):\n%s", diff)
			}
		})
	}
}

// A route without a weighted rule is refused with SetWeights' error, unless
// the call ends the rollout on rules addCanaryBackendRef left with stable
// alone (above).
func TestWeighRefusesARouteWithoutAWeightedRule(t *testing.T) {
	live := route(rolloutNS, rules(rule("", "/", routestest.Backend("web-stable", 100))))
	_, err := Weigh(WeighInput{Live: live, Split: Split{Stable: stable, Canary: canary, CanaryWeight: 0, MaxWeight: 100}, Experiment: input(), Ends: true})
	var none *NoWeightedRuleError
	if !errors.As(err, &none) {
		t.Fatalf("Weigh: %v, want a *NoWeightedRuleError", err)
	}
	if diff := cmp.Diff(&NoWeightedRuleError{Route: live.Ref, Stable: stable, Canary: canary}, none); diff != "" {
		t.Errorf("the error (-want +got):\n%s", diff)
	}
}

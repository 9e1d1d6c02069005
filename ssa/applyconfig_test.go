package ssa

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A served rule, defaults included, converts to the typed apply configuration
// and back without losing a byte.
func TestDecodeRulesKeepsEveryField(t *testing.T) {
	rules := []routes.Rule{{
		"name": "api",
		"matches": []any{map[string]any{
			"path":    map[string]any{"type": "PathPrefix", "value": "/api"},
			"headers": []any{map[string]any{"type": "Exact", "name": "x-env", "value": "prod"}},
		}},
		"filters": []any{map[string]any{
			"type":                  "RequestHeaderModifier",
			"requestHeaderModifier": map[string]any{"add": []any{map[string]any{"name": "x-a", "value": "b"}}},
		}},
		"timeouts": map[string]any{"request": "10s"},
		"backendRefs": []any{
			map[string]any{"group": "", "kind": "Service", "name": "stable", "port": int64(80), "weight": int64(70)},
			map[string]any{"group": "", "kind": "Service", "name": "canary", "port": int64(80), "weight": int64(0)},
		},
	}}
	var typed []gwv1ac.HTTPRouteRuleApplyConfiguration
	if err := decodeRules(rules, &typed); err != nil {
		t.Fatal(err)
	}
	if got := *typed[0].BackendRefs[1].Weight; got != 0 {
		t.Errorf("weight 0 became %d", got)
	}
	if got := *typed[0].BackendRefs[0].Group; got != "" {
		t.Errorf("group %q, want the explicit empty core group", got)
	}
	if diff := cmp.Diff("10s", string(*typed[0].Timeouts.Request)); diff != "" {
		t.Error(diff)
	}
}

// A field the plugin's Gateway API types do not know would be deleted by an
// apply of the atomic rules list: refuse instead.
func TestDecodeRulesRefusesUnknownFields(t *testing.T) {
	for name, rule := range map[string]routes.Rule{
		"unknown rule field":       {"futureField": true, "backendRefs": []any{}},
		"unknown backendRef field": {"backendRefs": []any{map[string]any{"name": "stable", "futureWeightMode": "x"}}},
	} {
		t.Run(name, func(t *testing.T) {
			var typed []gwv1ac.HTTPRouteRuleApplyConfiguration
			err := decodeRules([]routes.Rule{rule}, &typed)
			var unrep *UnrepresentableError
			if !errors.As(err, &unrep) {
				t.Fatalf("got %v, want an UnrepresentableError", err)
			}
		})
	}
}

// An empty list means the same as none: the typed apply configuration omits
// it, and that is not a loss worth refusing a write for.
func TestDecodeRulesAcceptsEmptyLists(t *testing.T) {
	var typed []gwv1ac.HTTPRouteRuleApplyConfiguration
	if err := decodeRules([]routes.Rule{{"filters": []any{}, "backendRefs": []any{map[string]any{"name": "stable"}}}}, &typed); err != nil {
		t.Fatal(err)
	}
}

package transform

import (
	"fmt"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// bigRoute is the largest route Gateway API allows: 16 rules of 16 backendRefs,
// each rule holding stable and canary.
func bigRoute() routes.Route {
	var rules []routes.Rule
	for i := range 16 {
		refs := []any{
			map[string]any{"group": "", "kind": "Service", "name": "stable", "port": int64(80), "weight": int64(100)},
			map[string]any{"group": "", "kind": "Service", "name": "canary", "port": int64(80), "weight": int64(0)},
		}
		for j := range 14 {
			refs = append(refs, map[string]any{"group": "", "kind": "Service", "name": fmt.Sprintf("other-%d", j), "port": int64(80), "weight": int64(1)})
		}
		rules = append(rules, routes.Rule{
			"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": fmt.Sprintf("/p%d", i)}}},
			"backendRefs": refs,
		})
	}
	return routes.Route{Ref: routes.Ref{Kind: routes.HTTPRoute, Namespace: "ns", Name: "big"}, Rules: rules}
}

// BenchmarkSetWeightsLargestRoute measures the pure transform on the largest
// route the CRD allows (run: make bench).
func BenchmarkSetWeightsLargestRoute(b *testing.B) {
	r := bigRoute()
	s := Split{Stable: routes.ServiceRef("ns", "stable"), Canary: routes.ServiceRef("ns", "canary"), CanaryWeight: 30, MaxWeight: 100}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := SetWeights(r, s, Targeting{}); err != nil {
			b.Fatal(err)
		}
	}
}

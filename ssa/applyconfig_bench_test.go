package ssa

import (
	"fmt"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// BenchmarkDecodeRulesLargestRoute measures building the typed apply
// configuration (with its lossless round-trip check) for 16 rules of 16
// backendRefs, the most an HTTPRoute may hold (run: make bench).
func BenchmarkDecodeRulesLargestRoute(b *testing.B) {
	var rules []routes.Rule
	for i := range 16 {
		var refs []any
		for j := range 16 {
			refs = append(refs, map[string]any{"group": "", "kind": "Service", "name": fmt.Sprintf("svc-%d", j), "port": int64(80), "weight": int64(j)})
		}
		rules = append(rules, routes.Rule{
			"matches":     []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": fmt.Sprintf("/p%d", i)}}},
			"backendRefs": refs,
		})
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fillHTTPRoute(rules); err != nil {
			b.Fatal(err)
		}
	}
}

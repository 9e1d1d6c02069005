package ssa

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// largestRules are 16 rules of 16 backendRefs, the most an HTTPRoute may hold.
func largestRules() []routes.Rule {
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
	return rules
}

// BenchmarkDecodeRulesLargestRoute measures the full lossless round trip
// into the typed apply configuration (run: make bench-micro).
func BenchmarkDecodeRulesLargestRoute(b *testing.B) {
	rules := largestRules()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fillHTTPRoute(rules); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEncodeLargestRoute measures what a write does instead when the
// shape vouches for the rules: their JSON written straight.
func BenchmarkEncodeLargestRoute(b *testing.B) {
	rules := largestRules()
	k := applies[kindVersion{routes.HTTPRoute, "v1"}]
	obj := applyObject(liveHTTPRoute, Content{Rules: rules})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := k.encode(obj); !ok {
			b.Fatal("the shortcut refused the rules")
		}
	}
}

// BenchmarkMarshalLargestRoute measures the client-go-free alternative to
// the shortcut that issue 60 weighed: json.Marshal of the same apply
// object. It writes what the object holds, nulls and empty lists included,
// which the typed configuration leaves out (so it is not the same write
// wherever the rules hold one; docs/performance/cpu-per-route.md).
func BenchmarkMarshalLargestRoute(b *testing.B) {
	obj := applyObject(liveHTTPRoute, Content{Rules: largestRules()})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(obj); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMarshalPrunedLargestRoute is json.Marshal after a walk that
// copies the object without its nulls and empty lists, about what the
// same write through json.Marshal would take (the walk cannot tell an
// empty object the types keep from an empty map they leave out: that takes
// the types, which is what shape.go holds).
func BenchmarkMarshalPrunedLargestRoute(b *testing.B) {
	obj := applyObject(liveHTTPRoute, Content{Rules: largestRules()})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(withoutEmpty(obj)); err != nil {
			b.Fatal(err)
		}
	}
}

// withoutEmpty is v without nulls and empty lists in its objects.
func withoutEmpty(v any) any {
	switch t := v.(type) {
	case routes.Rule:
		return withoutEmpty(map[string]any(t))
	case []routes.Rule:
		out := make([]any, len(t))
		for i, r := range t {
			out[i] = withoutEmpty(r)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if l, ok := e.([]any); e == nil || ok && len(l) == 0 {
				continue
			}
			out[k] = withoutEmpty(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = withoutEmpty(e)
		}
		return out
	}
	return v
}

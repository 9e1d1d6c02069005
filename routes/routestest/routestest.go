// Package routestest builds rules and backendRefs in the form the apiserver
// serves them through unstructured (JSON objects as map[string]any, lists as
// []any, numbers as int64, server defaults included), for the tests of the
// packages that read or change routes, as net/http/httptest serves the
// tests of net/http's users. Only tests import it.
package routestest

import "github.com/gatewayapi-ssa/rollouts-plugin/routes"

// Backend is a backendRef to a Service on port 8080, as served: group ""
// and kind Service included.
func Backend(name string, weight int64) map[string]any {
	return BackendOn(name, 8080, weight)
}

// BackendOn is Backend on another port.
func BackendOn(name string, port, weight int64) map[string]any {
	return map[string]any{"group": "", "kind": "Service", "name": name, "port": port, "weight": weight}
}

// Rule is a rule of the backends with a PathPrefix match on path (none
// when path is "").
func Rule(path string, backends ...map[string]any) routes.Rule {
	refs := make([]any, len(backends))
	for i, b := range backends {
		refs[i] = b
	}
	r := routes.Rule{"backendRefs": refs}
	if path != "" {
		r["matches"] = []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": path}}}
	}
	return r
}

// RuleWithUnmanaged is Rule with fields the plugin does not manage, a
// header filter and a request timeout, so that tests show they pass
// through.
func RuleWithUnmanaged(path string, backends ...map[string]any) routes.Rule {
	r := Rule(path, backends...)
	r["filters"] = []any{map[string]any{
		"type": "RequestHeaderModifier",
		"requestHeaderModifier": map[string]any{
			"add": []any{map[string]any{"name": "x-path", "value": path}},
		},
	}}
	r["timeouts"] = map[string]any{"request": "10s"}
	return r
}

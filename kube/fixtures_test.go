package kube

import "github.com/gatewayapi-ssa/rollouts-plugin/routes"

// wtNS is the namespace of the routes the tests read.
const wtNS = "shop"

// wtBackend is a backendRef as served: defaults included.
func wtBackend(name string, weight int64) map[string]any {
	return map[string]any{"group": "", "kind": "Service", "name": name, "port": int64(8080), "weight": weight}
}

// wtRule is a rule with a path match and the given backends.
func wtRule(path string, backends ...map[string]any) routes.Rule {
	refs := make([]any, len(backends))
	for i, b := range backends {
		refs[i] = b
	}
	return routes.Rule{"matches": []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": path}}}, "backendRefs": refs}
}

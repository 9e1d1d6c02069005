package desired

import "github.com/gatewayapi-ssa/rollouts-plugin/routes"

// The routes of the status and settle tests: one weighted rule of web-stable
// and web-canary, backendRefs as served.
const wtNS = ns

var (
	wtStable = routes.ServiceRef(wtNS, "web-stable")
	wtCanary = routes.ServiceRef(wtNS, "web-canary")
)

func wtBackend(name string, weight int64) map[string]any {
	return map[string]any{"group": "", "kind": "Service", "name": name, "port": int64(8080), "weight": weight}
}

func wtRule(path string, backends ...map[string]any) routes.Rule { return rule(path, backends...) }

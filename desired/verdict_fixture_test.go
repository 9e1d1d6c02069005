package desired

import "github.com/gatewayapi-ssa/rollouts-plugin/routes"

// The routes of the status and settle tests: one weighted rule of web-stable
// and web-canary, backendRefs as served.
const wtNS = ns

var (
	wtStable = routes.ServiceRef(wtNS, "web-stable")
	wtCanary = routes.ServiceRef(wtNS, "web-canary")
)

//go:build e2e

package e2e

import (
	"fmt"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/traffic"
)

// The other kinds Traefik carries, each walked by the controller and
// measured through Traefik at every step: a GRPCRoute (unary gRPC calls over
// h2c, a header rule matched on gRPC metadata), a TCPRoute (new TCP
// connections) and a TLSRoute (new TLS connections, passthrough by SNI).
func kindScenarios() []scenario {
	return []scenario{grpcCanary(), connCanary("TCPRoute", traffic.TCP, "tcp-canary", "tc", cluster.TCPListeners[0]), connCanary("TLSRoute", traffic.TLS, "tls-canary", "tl", cluster.TLSListener)}
}

// h2cService is a Service whose one port "grpc" carries gRPC over h2c
// (Traefik needs appProtocol kubernetes.io/h2c for a GRPCRoute's backends).
func h2cService(name, app string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
spec:
  selector:
    app: %s
  ports:
  - name: grpc
    port: 9000
    targetPort: 8080
    appProtocol: kubernetes.io/h2c
---
`, name, app)
}

// grpcRoute is a GRPCRoute on the Gateway's grpc listener for the
// grpc.testing.TestService: stable 100, canary 0.
func grpcRoute(name, stable, canary string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata:
  name: %s
spec:
  parentRefs:
  - name: `+cluster.GatewayName+`
    namespace: `+cluster.GatewayNamespace+`
    sectionName: `+cluster.GRPCListener+`
  hostnames:
  - %s.example.com
  rules:
  - matches:
    - method:
        service: grpc.testing.TestService
    backendRefs:
    - name: %s
      port: 9000
      weight: 100
    - name: %s
      port: 9000
      weight: 0
---
`, name, name, stable, canary)
}

func grpcCanary() scenario {
	stable, canary := "gc-stable", "gc-canary"
	return scenario{
		name: "canary-grpc",
		objects: h2cService(stable, "gc") + h2cService(canary, "gc") + grpcRoute("gc", stable, canary) + rolloutYAML("gc", `
stableService: gc-stable
canaryService: gc-canary
trafficRouting:
  managedRoutes:
  - name: canary-header
  plugins:
    argoproj-labs/gatewayAPI:
      grpcRoute: gc
steps:
- setWeight: 30
- pause: {}
- setHeaderRoute:
    name: canary-header
    match:
    - headerName: X-Canary
      headerValue:
        exact: "yes"
- pause: {}
- setWeight: 70
- pause: {}`),
		rollout:  "gc",
		route:    routeRef{"GRPCRoute", "gc"},
		backends: []backend{{service: stable, port: "grpc"}, {service: canary, port: "grpc"}},
		host:     host("gc"),
		protocol: traffic.GRPC,
		listener: cluster.GRPCListener,
		steps: []step{
			installed(map[string]int64{stable: 100, canary: 0}),
			{name: "image v2: setWeight 30, paused", do: img("gc", "v2"),
				want: want{phase: "Paused", stepIndex: index(1), weights: map[string]int64{stable: 70, canary: 30},
					versions: map[string]int64{"v1": 70, "v2": 30}}},
			{name: "promote: header rule on x-canary metadata, paused", do: action{kind: promote},
				want: want{phase: "Paused", stepIndex: index(3), rules: 2, header: &headerRule{"X-Canary", "yes", canary},
					weights: map[string]int64{stable: 70, canary: 30}}},
			{name: "promote: setWeight 70 next to the header rule", do: action{kind: promote},
				want: want{phase: "Paused", stepIndex: index(5), rules: 2, header: &headerRule{"X-Canary", "yes", canary},
					weights: map[string]int64{stable: 30, canary: 70}, versions: map[string]int64{"v1": 30, "v2": 70}}},
			{name: "promote: header rule gone, all on v2", do: action{kind: promote},
				want: want{phase: "Healthy", promoted: true, rules: 1, noHeaderRule: "X-Canary", released: true,
					weights: map[string]int64{stable: 100, canary: 0}, versions: map[string]int64{"v2": 100}}},
		},
	}
}

// connCanary is a canary (setWeight 30, pause, setWeight 70, pause) on a
// TCPRoute or TLSRoute of one rule, measured with new connections: TCP
// connections on the route's own TCP listener, or TLS connections whose SNI
// is the route's hostname on the passthrough listener.
func connCanary(kind string, proto traffic.Protocol, name, app, listener string) scenario {
	stable, canary := app+"-stable", app+"-canary"
	hostnames := ""
	if kind == "TLSRoute" {
		hostnames = fmt.Sprintf("  hostnames:\n  - %s\n", host(app))
	}
	route := fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: %s
metadata:
  name: %s
spec:
  parentRefs:
  - name: %s
    namespace: %s
    sectionName: %s
%s  rules:
  - backendRefs:
    - name: %s
      port: 80
      weight: 100
    - name: %s
      port: 80
      weight: 0
---
`, kind, app, cluster.GatewayName, cluster.GatewayNamespace, listener, hostnames, stable, canary)
	return scenario{
		name: name,
		objects: service(stable, app, 80) + service(canary, app, 80) + route + rolloutYAML(app, fmt.Sprintf(`
stableService: %s
canaryService: %s
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      %s: %s
steps:
- setWeight: 30
- pause: {}
- setWeight: 70
- pause: {}`, stable, canary, map[string]string{"TCPRoute": "tcpRoute", "TLSRoute": "tlsRoute"}[kind], app)),
		rollout:  app,
		route:    routeRef{kind, app},
		backends: backends(stable, canary),
		host:     host(app),
		protocol: proto,
		listener: listener,
		steps: []step{
			installed(map[string]int64{stable: 100, canary: 0}),
			{name: "image v2: setWeight 30, paused", do: img(app, "v2"),
				want: want{phase: "Paused", stepIndex: index(1), weights: map[string]int64{stable: 70, canary: 30},
					versions: map[string]int64{"v1": 70, "v2": 30}}},
			{name: "promote: setWeight 70, paused", do: action{kind: promote},
				want: want{phase: "Paused", stepIndex: index(3), weights: map[string]int64{stable: 30, canary: 70},
					versions: map[string]int64{"v1": 30, "v2": 70}}},
			{name: "promote: fully promoted, all on v2", do: action{kind: promote},
				want: want{phase: "Healthy", promoted: true, stepIndex: index(4), released: true,
					weights: map[string]int64{stable: 100, canary: 0}, versions: map[string]int64{"v2": 100}}},
		},
	}
}

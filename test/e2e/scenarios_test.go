//go:build e2e

package e2e

import (
	"fmt"
	"strings"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
)

// service is a Service in front of the Rollout's pods (Argo Rollouts adds the
// pod-template-hash to its selector), its one port "main" TCP.
func service(name, app string, port int) string {
	return servicePort(name, app, "main", port, 8080, "TCP")
}

// udpService is such a Service whose one port "dns" is UDP.
func udpService(name, app string, port int) string {
	return servicePort(name, app, "dns", port, 5353, "UDP")
}

func servicePort(name, app, portName string, port, targetPort int, protocol string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
spec:
  selector:
    app: %s
  ports:
  - name: %s
    port: %d
    targetPort: %d
    protocol: %s
---
`, name, app, portName, port, targetPort, protocol)
}

// httpRoute is an HTTPRoute on the Traefik Gateway with one rule: stable
// 100, canary 0. Its hostname is host(name).
func httpRoute(name, stable, canary string) string {
	return fmt.Sprintf(`apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: %s
spec:
  parentRefs:
  - name: `+cluster.GatewayName+`
    namespace: `+cluster.GatewayNamespace+`
    sectionName: `+cluster.GatewayListener+`
  hostnames:
  - %s.example.com
  rules:
  - matches:
    - path:
        type: PathPrefix
        value: /
    backendRefs:
    - name: %s
      port: 80
      weight: 100
    - name: %s
      port: 80
      weight: 0
---
`, name, name, stable, canary)
}

// host is the hostname of httpRoute(name): the Host of its requests.
func host(route string) string { return route + ".example.com" }

// backends are Services with the port "main" that service() makes.
func backends(services ...string) []backend {
	var out []backend
	for _, s := range services {
		out = append(out, backend{service: s, port: "main"})
	}
	return out
}

// experimentBackends are the Services an Experiment controller creates: their
// one port is unnamed, as the Rollout's container port is.
func experimentBackends(services ...string) []backend {
	var out []backend
	for _, s := range services {
		out = append(out, backend{service: s})
	}
	return out
}

// rolloutYAML is a Rollout of two replicas of image app:v1 with a canary strategy
// (indented YAML under spec.strategy.canary).
func rolloutYAML(name, canary string) string {
	return fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: %s
spec:
  replicas: 2
  revisionHistoryLimit: 3
  selector:
    matchLabels:
      app: %s
  template:
    metadata:
      labels:
        app: %s
    spec:
      containers:
      - name: app
        image: registry.example/%s:v1
        ports:
        - containerPort: 8080
  strategy:
    canary:
      scaleDownDelaySeconds: 5
%s
`, name, name, name, name, indent(strings.TrimSpace(canary), 6))
}

// mirrorObjects are the Services, HTTPRoute and Rollout of a mirror
// scenario: setWeight 20, then (after pause, if given) a setMirrorRoute
// step mirroring half of every GET, then a pause; config is more of the
// plugin's config.
func mirrorObjects(app, config, pause string) string {
	if config != "" {
		config = "\n      " + config
	}
	return service(app+"-stable", app, 80) + service(app+"-canary", app, 80) + httpRoute(app, app+"-stable", app+"-canary") +
		rolloutYAML(app, fmt.Sprintf(`
stableService: %[1]s-stable
canaryService: %[1]s-canary
trafficRouting:
  managedRoutes:
  - name: mirror
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: %[1]s%[2]s
steps:
- setWeight: 20
%[3]s- setMirrorRoute:
    name: mirror
    percentage: 50
    match:
    - method:
        exact: GET
      path:
        prefix: /
- pause: {}`, app, config, pause))
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = pad + l
		}
	}
	return strings.Join(lines, "\n")
}

func img(app, tag string) action { return image("registry.example/" + app + ":" + tag) }

// installed is the first step of every scenario: the Rollout's first revision
// is Healthy and the route is untouched.
func installed(weights map[string]int64) step {
	return step{name: "installed: Healthy, route untouched", want: want{phase: "Healthy", promoted: true, weights: weights}}
}

func scenarios() []scenario {
	return []scenario{
		{
			name: "canary",
			objects: service("canary-stable", "canary", 80) + service("canary-canary", "canary", 80) +
				httpRoute("canary", "canary-stable", "canary-canary") +
				rolloutYAML("canary", `
stableService: canary-stable
canaryService: canary-canary
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: canary
steps:
- setWeight: 30
- pause: {}
- setWeight: 70
- pause: {}`),
			rollout:  "canary",
			route:    routeRef{"HTTPRoute", "canary"},
			backends: backends("canary-stable", "canary-canary"),
			host:     host("canary"),
			steps: []step{
				{name: "installed: Healthy, route untouched", want: want{phase: "Healthy", promoted: true,
					weights: map[string]int64{"canary-stable": 100, "canary-canary": 0}, versions: map[string]int64{"v1": 100}}},
				{name: "image v2: setWeight 30, paused", do: img("canary", "v2"),
					want: want{phase: "Paused", stepIndex: index(1), weights: map[string]int64{"canary-stable": 70, "canary-canary": 30},
						versions: map[string]int64{"v1": 70, "v2": 30}}},
				{name: "promote: setWeight 70, paused", do: action{kind: promote},
					want: want{phase: "Paused", stepIndex: index(3), weights: map[string]int64{"canary-stable": 30, "canary-canary": 70},
						versions: map[string]int64{"v1": 30, "v2": 70}}},
				{name: "promote: fully promoted, all on v2", do: action{kind: promote},
					want: want{phase: "Healthy", promoted: true, stepIndex: index(4), weights: map[string]int64{"canary-stable": 100, "canary-canary": 0},
						versions: map[string]int64{"v2": 100}}},
			},
		},
		{
			name: "abort",
			objects: service("abort-stable", "abort", 80) + service("abort-canary", "abort", 80) +
				httpRoute("abort", "abort-stable", "abort-canary") +
				rolloutYAML("abort", `
stableService: abort-stable
canaryService: abort-canary
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: abort
steps:
- setWeight: 30
- pause: {}
- setWeight: 60
- pause: {}`),
			rollout:  "abort",
			route:    routeRef{"HTTPRoute", "abort"},
			backends: backends("abort-stable", "abort-canary"),
			host:     host("abort"),
			steps: []step{
				installed(map[string]int64{"abort-stable": 100, "abort-canary": 0}),
				{name: "image v2: setWeight 30, paused", do: img("abort", "v2"),
					want: want{phase: "Paused", stepIndex: index(1), weights: map[string]int64{"abort-stable": 70, "abort-canary": 30}}},
				{name: "abort: stable 100, Degraded", do: action{kind: abort},
					want: want{phase: "Degraded", aborted: true, weights: map[string]int64{"abort-stable": 100, "abort-canary": 0},
						versions: map[string]int64{"v1": 100}}},
				{name: "image back to v1: Healthy, stable 100", do: img("abort", "v1"),
					want: want{phase: "Healthy", promoted: true, weights: map[string]int64{"abort-stable": 100, "abort-canary": 0},
						versions: map[string]int64{"v1": 100}}},
			},
		},
		{
			name: "pingpong-tcp",
			objects: service("pp-ping", "pp", 9000) + service("pp-pong", "pp", 9000) + `apiVersion: gateway.networking.k8s.io/v1
kind: TCPRoute
metadata:
  name: pp
spec:
  parentRefs:
  - name: e2e-gateway
    sectionName: tcp
  rules:
  - backendRefs:
    - name: pp-ping
      port: 9000
      weight: 100
    - name: pp-pong
      port: 9000
      weight: 0
---
` + rolloutYAML("pp", `
pingPong:
  pingService: pp-ping
  pongService: pp-pong
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      tcpRoute: pp
steps:
- setWeight: 20
- pause: {}`),
			rollout: "pp",
			route:   routeRef{"TCPRoute", "pp"},
			steps:   pingPongSteps("pp"),
		},
		{
			// A canary on a UDPRoute v1 (Gateway API v1.6.3's standard
			// channel), on the route only: Traefik v3.6 has no UDPRoute, so
			// its parent is a Gateway nobody serves and no traffic is sent.
			name: "canary-udp",
			objects: udpService("udp-stable", "udp", 53) + udpService("udp-canary", "udp", 53) + `apiVersion: gateway.networking.k8s.io/v1
kind: UDPRoute
metadata:
  name: udp
spec:
  parentRefs:
  - name: e2e-gateway
    sectionName: dns
  rules:
  - backendRefs:
    - name: udp-stable
      port: 53
      weight: 100
    - name: udp-canary
      port: 53
      weight: 0
---
` + rolloutYAML("udp", `
stableService: udp-stable
canaryService: udp-canary
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      udpRoute: udp
steps:
- setWeight: 30
- pause: {}`),
			rollout: "udp",
			route:   routeRef{"UDPRoute", "udp"},
			steps: []step{
				{name: "installed: Healthy, route untouched", want: want{phase: "Healthy", promoted: true, released: true,
					weights: map[string]int64{"udp-stable": 100, "udp-canary": 0}}},
				{name: "image v2: setWeight 30, paused", do: img("udp", "v2"),
					want: want{phase: "Paused", stepIndex: index(1), weights: map[string]int64{"udp-stable": 70, "udp-canary": 30}}},
				{name: "promote: Healthy, stable 100, the plugin owns nothing", do: action{kind: promote},
					want: want{phase: "Healthy", promoted: true, stepIndex: index(2), released: true,
						weights: map[string]int64{"udp-stable": 100, "udp-canary": 0}}},
			},
		},
		{
			// The same flip on an HTTPRoute, measured through Traefik.
			name: "pingpong-http",
			objects: service("pph-ping", "pph", 80) + service("pph-pong", "pph", 80) +
				httpRoute("pph", "pph-ping", "pph-pong") +
				rolloutYAML("pph", `
pingPong:
  pingService: pph-ping
  pongService: pph-pong
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: pph
steps:
- setWeight: 20
- pause: {}`),
			rollout:  "pph",
			route:    routeRef{"HTTPRoute", "pph"},
			backends: backends("pph-ping", "pph-pong"),
			host:     host("pph"),
			steps:    pingPongSteps("pph"),
		},
		{
			// The controller reports plugin errors as TrafficRoutingError events.
			name: "missing-route",
			objects: service("missing-stable", "missing", 80) + service("missing-canary", "missing", 80) +
				httpRoute("present", "missing-stable", "missing-canary") +
				rolloutYAML("missing", `
stableService: missing-stable
canaryService: missing-canary
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: does-not-exist
steps:
- setWeight: 10
- pause: {}`),
			rollout: "missing",
			route:   routeRef{"HTTPRoute", "present"},
			steps: []step{
				{name: "the plugin's error reaches the Rollout", within: time.Minute,
					want: want{errorText: []string{"HTTPRoute e2e-missing-route/does-not-exist", "not found"},
						weights: map[string]int64{"missing-stable": 100, "missing-canary": 0}}},
			},
		},
		// The GKE case: an experiment with baseline and canary templates
		// that take weight next to the canary, then end.
		experimentScenario("experiment", "exp", false),
		{
			// setCanaryScale first: while the canary has no available pod, Argo
			// Rollouts calls RemoveManagedRoutes on every reconcile, so a header
			// rule set before that is removed again (and never set back: the
			// controller calls SetHeaderRoute only on the setHeaderRoute step).
			name: "header-route",
			objects: service("hdr-stable", "hdr", 80) + service("hdr-canary", "hdr", 80) +
				httpRoute("hdr", "hdr-stable", "hdr-canary") +
				rolloutYAML("hdr", `
stableService: hdr-stable
canaryService: hdr-canary
trafficRouting:
  managedRoutes:
  - name: canary-header
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: hdr
steps:
- setCanaryScale:
    replicas: 1
- setHeaderRoute:
    name: canary-header
    match:
    - headerName: X-Canary
      headerValue:
        exact: "yes"
- pause: {}
- setWeight: 20
- pause: {}`),
			rollout:  "hdr",
			route:    routeRef{"HTTPRoute", "hdr"},
			backends: backends("hdr-stable", "hdr-canary"),
			host:     host("hdr"),
			steps: []step{
				installed(map[string]int64{"hdr-stable": 100, "hdr-canary": 0}),
				{name: "image v2: header rule to canary, paused", do: img("hdr", "v2"),
					want: want{phase: "Paused", stepIndex: index(2), rules: 2, header: &headerRule{"X-Canary", "yes", "hdr-canary"},
						weights: map[string]int64{"hdr-stable": 100, "hdr-canary": 0}}},
				{name: "promote: setWeight 20 next to the header rule", do: action{kind: promote},
					want: want{phase: "Paused", stepIndex: index(4), rules: 2, header: &headerRule{"X-Canary", "yes", "hdr-canary"},
						weights: map[string]int64{"hdr-stable": 80, "hdr-canary": 20}}},
				{name: "promote: header rule gone, stable 100", do: action{kind: promote},
					want: want{phase: "Healthy", promoted: true, rules: 1, noHeaderRule: "X-Canary",
						weights: map[string]int64{"hdr-stable": 100, "hdr-canary": 0}, versions: map[string]int64{"v2": 100}}},
			},
		},
		{
			// Traefik implements no RequestMirror, and its GatewayClass says so:
			// the plugin refuses the setMirrorRoute step before any write, the
			// controller logs the error, the split stays 80/20 with no error
			// answered; the abort gives the route back.
			name:     "mirror-refused",
			objects:  mirrorObjects("mr", "", "- pause: {}\n"),
			rollout:  "mr",
			route:    routeRef{"HTTPRoute", "mr"},
			backends: backends("mr-stable", "mr-canary"),
			host:     host("mr"),
			steps: []step{
				installed(map[string]int64{"mr-stable": 100, "mr-canary": 0}),
				{name: "image v2: 80/20, paused", do: img("mr", "v2"),
					want: want{phase: "Paused", stepIndex: index(1), rules: 1, weights: map[string]int64{"mr-stable": 80, "mr-canary": 20}}},
				{name: "promote: setMirrorRoute refused, nothing written", do: action{kind: promote},
					want: want{stepIndex: index(2), rules: 1, weights: map[string]int64{"mr-stable": 80, "mr-canary": 20},
						logged: []string{"needs HTTPRouteRequestMirror (a RequestMirror filter)", "GatewayClass " + cluster.GatewayClassName,
							`does not list HTTPRouteRequestMirror, HTTPRouteRequestPercentageMirror in status.supportedFeatures`, "nothing was written"}}},
				{name: "abort: stable 100, route given back", do: action{kind: abort},
					want: want{aborted: true, rules: 1, released: true, weights: map[string]int64{"mr-stable": 100, "mr-canary": 0}}},
			},
		},
		{
			// The same step with assumeGatewayFeatures: the plugin writes the
			// mirror rule, and Traefik answers 500 to every request it matches
			// (here: every GET); why the check exists. Promotion removes it.
			name:     "mirror-assumed",
			objects:  mirrorObjects("ma", "assumeGatewayFeatures: [HTTPRouteRequestMirror, HTTPRouteRequestPercentageMirror]", ""),
			rollout:  "ma",
			route:    routeRef{"HTTPRoute", "ma"},
			backends: backends("ma-stable", "ma-canary"),
			host:     host("ma"),
			steps: []step{
				installed(map[string]int64{"ma-stable": 100, "ma-canary": 0}),
				{name: "image v2: mirror rule written, paused", do: img("ma", "v2"),
					want: want{phase: "Paused", stepIndex: index(2), rules: 2, gatewayErrors: true}},
				{name: "promote: mirror rule gone, stable 100", do: action{kind: promote},
					want: want{phase: "Healthy", promoted: true, rules: 1, released: true,
						weights: map[string]int64{"ma-stable": 100, "ma-canary": 0}, versions: map[string]int64{"v2": 100}}},
			},
		},
		{
			// Abort while a header rule and an experiment's backends are on the
			// route: both go, stable gets everything back.
			name: "abort-managed",
			objects: service("am-stable", "am", 80) + service("am-canary", "am", 80) +
				httpRoute("am", "am-stable", "am-canary") +
				rolloutYAML("am", `
stableService: am-stable
canaryService: am-canary
trafficRouting:
  managedRoutes:
  - name: canary-header
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: am
steps:
- setCanaryScale:
    replicas: 1
- setHeaderRoute:
    name: canary-header
    match:
    - headerName: X-Canary
      headerValue:
        exact: "yes"
- setWeight: 10
- experiment:
    duration: 10m
    templates:
    - name: baseline
      specRef: stable
      service:
        name: am-baseline
      weight: 5
    - name: experiment
      specRef: canary
      service:
        name: am-experiment
      weight: 25
- pause: {}`),
			rollout:  "am",
			route:    routeRef{"HTTPRoute", "am"},
			backends: append(backends("am-stable", "am-canary"), experimentBackends("am-baseline", "am-experiment")...),
			host:     host("am"),
			steps: []step{
				installed(map[string]int64{"am-stable": 100, "am-canary": 0}),
				{name: "image v2: header rule and experiment on the route", do: img("am", "v2"),
					want: want{stepIndex: index(3), rules: 2, header: &headerRule{"X-Canary", "yes", "am-canary"},
						weights: map[string]int64{"am-stable": 60, "am-canary": 10, "am-baseline": 5, "am-experiment": 25}}},
				{name: "abort: rule and experiment backends gone, stable 100", do: action{kind: abort},
					want: want{phase: "Degraded", aborted: true, rules: 1, noHeaderRule: "X-Canary",
						weights: map[string]int64{"am-stable": 100, "am-canary": 0}, versions: map[string]int64{"v1": 100}}},
				{name: "image back to v1: Healthy, stable 100", do: img("am", "v1"),
					want: want{phase: "Healthy", promoted: true, rules: 1, weights: map[string]int64{"am-stable": 100, "am-canary": 0}}},
			},
		},
		{
			// verifyWeight on Traefik with its default settings (a 2 s reload
			// throttle): each setWeight step, and the promotion, waits for
			// Verified, and at that moment Traefik carries the weight.
			name: "verify-weight",
			objects: service("vw-stable", "vw", 80) + service("vw-canary", "vw", 80) +
				httpRoute("vw", "vw-stable", "vw-canary") +
				rolloutYAML("vw", `
stableService: vw-stable
canaryService: vw-canary
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: vw
      verifyWeight: true
steps:
- setWeight: 30
- pause: {}
- setWeight: 70
- pause: {}`),
			rollout:  "vw",
			route:    routeRef{"HTTPRoute", "vw"},
			backends: backends("vw-stable", "vw-canary"),
			host:     host("vw"),
			steps: []step{
				installed(map[string]int64{"vw-stable": 100, "vw-canary": 0}),
				{name: "image v2: setWeight 30 verified, paused", do: img("vw", "v2"),
					want: want{phase: "Paused", stepIndex: index(1), weights: map[string]int64{"vw-stable": 70, "vw-canary": 30},
						verified: &verifiedWant{stepIndex: "0", weight: 30, split: map[string]int64{"vw-stable": 70, "vw-canary": 30}}}},
				{name: "promote: setWeight 70 verified, paused", do: action{kind: promote},
					want: want{phase: "Paused", stepIndex: index(3), weights: map[string]int64{"vw-stable": 30, "vw-canary": 70},
						verified: &verifiedWant{stepIndex: "2", weight: 70, split: map[string]int64{"vw-stable": 30, "vw-canary": 70}}}},
				{name: "promote: canary 100 verified, then promoted", do: action{kind: promote},
					want: want{phase: "Healthy", promoted: true, stepIndex: index(4), weights: map[string]int64{"vw-stable": 100, "vw-canary": 0},
						versions: map[string]int64{"v2": 100},
						verified: &verifiedWant{stepIndex: "4", weight: 100, split: map[string]int64{"vw-stable": 0, "vw-canary": 100}}}},
			},
		},
	}
}

// pingPongSteps walk a ping-pong Rollout (setWeight 20, pause) through two
// flips: pong takes over, then ping again.
func pingPongSteps(app string) []step {
	ping, pong := app+"-ping", app+"-pong"
	return []step{
		{name: "installed: ping stable, ping 100", want: want{phase: "Healthy", promoted: true, stablePingPong: "ping",
			weights: map[string]int64{ping: 100, pong: 0}, versions: map[string]int64{"v1": 100}}},
		{name: "image v2: pong is canary, 80/20", do: img(app, "v2"),
			want: want{phase: "Paused", stepIndex: index(1), stablePingPong: "ping", weights: map[string]int64{ping: 80, pong: 20},
				versions: map[string]int64{"v1": 80, "v2": 20}}},
		{name: "promote: pong stable, pong 100", do: action{kind: promote},
			want: want{phase: "Healthy", promoted: true, stablePingPong: "pong", weights: map[string]int64{ping: 0, pong: 100},
				versions: map[string]int64{"v2": 100}}},
		{name: "image v3: ping is canary, 20/80", do: img(app, "v3"),
			want: want{phase: "Paused", stepIndex: index(1), stablePingPong: "pong", weights: map[string]int64{ping: 20, pong: 80},
				versions: map[string]int64{"v3": 20, "v2": 80}}},
		{name: "promote: ping stable again, ping 100", do: action{kind: promote},
			want: want{phase: "Healthy", promoted: true, stablePingPong: "ping", weights: map[string]int64{ping: 100, pong: 0},
				versions: map[string]int64{"v3": 100}}},
	}
}

// restartScenario: the controller killed in the middle of an experiment step
// (its plugin process dies with it, its Lease left behind) and started
// again: the new plugin process finds what the old one added on the route
// (the claims) and ends the experiment exactly. It kills the controller
// that every scenario shares, so it runs by itself, after them
// (TestControllerRestartMidExperiment).
func restartScenario() scenario { return experimentScenario("experiment-restart", "exr", true) }

// experimentScenario: setWeight 10, then an experiment with baseline (5)
// and canary (25) templates → 60/10/5/25, ended → 90/10, promoted → 100/0;
// with restart, the controller is killed and started again while the
// experiment runs (which then lasts 60 s instead of 30).
func experimentScenario(name, app string, restart bool) scenario {
	duration := "30s"
	if restart {
		duration = "60s"
	}
	stable, canary, baseline, experiment := app+"-stable", app+"-canary", app+"-baseline", app+"-experiment"
	running := map[string]int64{stable: 60, canary: 10, baseline: 5, experiment: 25}
	steps := []step{
		installed(map[string]int64{stable: 100, canary: 0}),
		{name: "image v2: experiment running, 60/10/5/25", do: img(app, "v2"),
			want: want{stepIndex: index(1), weights: running, versions: map[string]int64{"v1": 65, "v2": 35}}},
	}
	ended := "experiment ended: its backends gone, 90/10"
	if restart {
		steps = append(steps, step{name: "controller killed and restarted mid-experiment: still 60/10/5/25", do: action{kind: restartController},
			want: want{stepIndex: index(1), weights: running, versions: map[string]int64{"v1": 65, "v2": 35}}})
		ended = "experiment ended after the restart: its backends gone, 90/10"
	}
	steps = append(steps,
		step{name: ended, within: 3 * time.Minute,
			want: want{phase: "Paused", stepIndex: index(2), weights: map[string]int64{stable: 90, canary: 10}}},
		step{name: "promote: stable 100, the plugin owns nothing", do: action{kind: promote},
			want: want{phase: "Healthy", promoted: true, released: true, weights: map[string]int64{stable: 100, canary: 0},
				versions: map[string]int64{"v2": 100}}})
	return scenario{
		name: name,
		objects: service(stable, app, 80) + service(canary, app, 80) +
			httpRoute(app, stable, canary) +
			rolloutYAML(app, fmt.Sprintf(`
stableService: %s
canaryService: %s
trafficRouting:
  plugins:
    argoproj-labs/gatewayAPI:
      httpRoute: %s
steps:
- setWeight: 10
- experiment:
    duration: %s
    templates:
    - name: baseline
      specRef: stable
      service:
        name: %s
      weight: 5
    - name: experiment
      specRef: canary
      service:
        name: %s
      weight: 25
- pause: {}`, stable, canary, app, duration, baseline, experiment)),
		rollout:  app,
		route:    routeRef{"HTTPRoute", app},
		backends: append(backends(stable, canary), experimentBackends(baseline, experiment)...),
		host:     host(app),
		steps:    steps,
	}
}

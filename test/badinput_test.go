package test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	rolloutsrpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
)

// badInput is one input a user can get wrong, the call that carries it, and
// what its error must say.
type badInput struct {
	name string
	call func(p rolloutsrpc.TrafficRouterPlugin) rpcErr
	want []string
}

// The corpus of bad inputs: config, steps, routes, Services and weights. Every
// one is answered with an RpcError that names the Rollout and says what to
// fix; nothing is written, to the route it is about or any other; and the
// plugin process lives on (no panic, no crash).
func TestBadInputIsAnErrorAndWritesNothing(t *testing.T) {
	standard := parallel(t)
	ns := namespace(t, standard)
	service(t, standard, ns, "exp", "http:80")
	routesYAML := map[string]string{
		"good": routeYAML("v1", "HTTPRoute", "good"),
		"stable-only": `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: stable-only}
spec:
  rules:
  - backendRefs: [{name: stable, port: 80}]
`,
		"stable-twice": `apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: stable-twice}
spec:
  rules:
  - backendRefs: [{name: stable, port: 80}, {name: stable, port: 80}, {name: canary, port: 80, weight: 0}]
`,
		"garbled-claims": strings.Replace(routeYAML("v1", "HTTPRoute", "garbled-claims"), "metadata:\n",
			"metadata:\n  annotations: {gatewayapi-ssa.dev/claims: 'not what the plugin wrote'}\n", 1),
		"tls":  routeYAML("v1", "TLSRoute", "tls"),
		"grpc": routeYAML("v1", "GRPCRoute", "grpc"),
	}
	full := "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {name: full}\nspec:\n  rules:\n" +
		"  - backendRefs: [{name: stable, port: 80, weight: 100}, {name: canary, port: 80, weight: 0}]\n"
	for i := range 15 {
		full += fmt.Sprintf("  - matches: [{path: {type: PathPrefix, value: /r%d}}]\n    backendRefs: [{name: static, port: 80}]\n", i)
	}
	routesYAML["full"] = full
	for _, y := range routesYAML {
		create(t, standard, ns, y)
	}
	kindOf := func(name string) string {
		if k, ok := map[string]string{"tls": "TLSRoute", "grpc": "GRPCRoute"}[name]; ok {
			return k
		}
		return "HTTPRoute"
	}
	p := startPlugin(t, standard)

	ro := func(cfg string, edits ...func(*v1alpha1.Rollout)) *v1alpha1.Rollout {
		r := rollout(ns, cfg)
		r.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "canary-header"}, {Name: "Canary_Header"}, {Name: "mirror"}}
		for _, e := range edits {
			e(r)
		}
		return r
	}
	good := ro(`{"httpRoute": "good"}`)
	maxWeight := func(m int32) func(*v1alpha1.Rollout) {
		return func(r *v1alpha1.Rollout) { r.Spec.Strategy.Canary.TrafficRouting.MaxTrafficWeight = &m }
	}
	setWeight := func(r *v1alpha1.Rollout, w int32, d ...v1alpha1.WeightDestination) func(rolloutsrpc.TrafficRouterPlugin) rpcErr {
		return func(p rolloutsrpc.TrafficRouterPlugin) rpcErr { return p.SetWeight(r, w, d) }
	}
	header := func(r *v1alpha1.Rollout, name string, match ...v1alpha1.HeaderRoutingMatch) func(rolloutsrpc.TrafficRouterPlugin) rpcErr {
		return func(p rolloutsrpc.TrafficRouterPlugin) rpcErr {
			return p.SetHeaderRoute(r, &v1alpha1.SetHeaderRoute{Name: name, Match: match})
		}
	}
	hdr := func(name string, v v1alpha1.StringMatch) v1alpha1.HeaderRoutingMatch {
		return v1alpha1.HeaderRoutingMatch{HeaderName: name, HeaderValue: &v}
	}
	mirror := func(r *v1alpha1.Rollout, percent int32, match ...v1alpha1.RouteMatch) func(rolloutsrpc.TrafficRouterPlugin) rpcErr {
		return func(p rolloutsrpc.TrafficRouterPlugin) rpcErr {
			return p.SetMirrorRoute(r, &v1alpha1.SetMirrorRoute{Name: "mirror", Match: match, Percentage: &percent})
		}
	}
	path := func(s v1alpha1.StringMatch) v1alpha1.RouteMatch { return v1alpha1.RouteMatch{Path: &s} }
	dest := func(name string, w int32) v1alpha1.WeightDestination {
		return v1alpha1.WeightDestination{ServiceName: name, Weight: w}
	}
	corpus := []badInput{
		// Config.
		{"unknown key", setWeight(ro(`{"httpRoute": "good", "httpRoutez": []}`), 30), []string{`unknown key "httpRoutez"`, "known keys"}},
		{"empty config", setWeight(ro(``), 30), []string{"empty"}},
		{"config names no route", setWeight(ro(`{}`), 30), []string{"names no route", "set httpRoute(s)"}},
		{"malformed JSON", setWeight(ro(`{"httpRoute": "good"`), 30), []string{"malformed JSON"}},
		{"wrong type", setWeight(ro(`{"httpRoutes": "good"}`), 30), []string{`"httpRoutes"`, "a list"}},
		{"invalid selector", setWeight(ro(`{"httpRouteSelector": {"matchExpressions": [{"key": "app", "operator": "Near", "values": ["x"]}]}}`), 30), []string{`"httpRouteSelector"`, "Near"}},
		{"empty selector", setWeight(ro(`{"httpRouteSelector": {}}`), 30), []string{`"httpRouteSelector" is empty`, "give matchLabels"}},
		{"selector matching nothing", setWeight(ro(`{"httpRoute": "good", "httpRouteSelector": {"matchLabels": {"app": "nope"}}}`), 30), []string{"matches no route", "fix the selector"}},
		{"route entry without name", setWeight(ro(`{"httpRoutes": [{"useHeaderRoutes": true}]}`), 30), []string{`"httpRoutes": entry 0 has no name`}},
		{"invalid label key", setWeight(ro(`{"httpRoute": "good", "inProgressLabelKey": "not a key"}`), 30), []string{`"inProgressLabelKey"`, "not a label key"}},
		{"invalid label value", setWeight(ro(`{"httpRoute": "good", "inProgressLabelValue": "not valid!"}`), 30), []string{`"inProgressLabelValue"`, "not a label value"}},
		{"namespace not a name", setWeight(ro(`{"httpRoute": "good", "namespace": "Not_A_Namespace"}`), 30), []string{`key "namespace"`, "not a namespace name"}},
		{"conflictPolicy unknown", setWeight(ro(`{"httpRoute": "good", "conflictPolicy": "Sometimes"}`), 30), []string{`"conflictPolicy" must be "Error" or "Force"`}},
		{"config under another plugin name", setWeight(ro(`{"httpRoute": "good"}`, func(r *v1alpha1.Rollout) {
			plugins := r.Spec.Strategy.Canary.TrafficRouting.Plugins
			plugins["acme/gateway"] = plugins["argoproj-labs/gatewayAPI"]
			delete(plugins, "argoproj-labs/gatewayAPI")
		}), 30), []string{`plugins["argoproj-labs/gatewayAPI"] is missing`, "-plugin-name"}},
		// Routes.
		{"missing route", setWeight(ro(`{"httpRoutes": [{"name": "good"}, {"name": "missing"}]}`), 30), []string{"HTTPRoute " + ns + "/missing not found", "create it"}},
		{"no rule with both backends", setWeight(ro(`{"httpRoutes": [{"name": "good"}, {"name": "stable-only"}]}`), 30),
			[]string{"HTTPRoute " + ns + "/stable-only has no rule", "Service " + ns + "/stable", "Service " + ns + "/canary"}},
		{"rule listing stable twice", setWeight(ro(`{"httpRoute": "stable-twice"}`), 30), []string{"HTTPRoute " + ns + "/stable-twice", "twice"}},
		{"claims annotation garbled", setWeight(ro(`{"httpRoute": "garbled-claims"}`), 30), []string{"gatewayapi-ssa.dev/claims is not what the plugin wrote", "restore it"}},
		{"TLSRoute listed for header routes", header(ro(`{"httpRoute": "good", "tlsRoutes": [{"name": "tls", "useHeaderRoutes": true}]}`), "canary-header", hdr("X-Canary", v1alpha1.StringMatch{Exact: "yes"})),
			[]string{"TLSRoute " + ns + "/tls", "no matches", "remove useHeaderRoutes"}},
		{"header rule past the 16-rule limit", header(ro(`{"httpRoute": "full"}`), "canary-header", hdr("X-Canary", v1alpha1.StringMatch{Exact: "yes"})),
			[]string{"HTTPRoute " + ns + "/full", "17 rules", "16"}},
		// Services and weights.
		{"no canary Service", setWeight(ro(`{"httpRoute": "good"}`, func(r *v1alpha1.Rollout) { r.Spec.Strategy.Canary.CanaryService = "" }), 30), []string{"canaryService"}},
		{"weight over maxTrafficWeight", setWeight(ro(`{"httpRoute": "good"}`, maxWeight(50)), 60), []string{"weight 60 is outside 0..50"}},
		{"negative weight", setWeight(good, -1), []string{"weight -1"}},
		{"maxTrafficWeight past Gateway API's largest weight", setWeight(ro(`{"httpRoute": "good"}`, maxWeight(2_000_000)), 10), []string{"maxTrafficWeight 2000000 is outside 1..1000000"}},
		{"experiment Service missing", setWeight(good, 0, dest("exp", 5), dest("exp-gone", 5)), []string{"Service " + ns + "/exp-gone not found"}},
		{"experiment without a Service name", setWeight(good, 0, dest("", 5)), []string{"no Service name", "give the template's container a port"}},
		{"experiment Service twice", setWeight(good, 0, dest("exp", 5), dest("exp", 5)), []string{"exp is listed twice"}},
		{"experiment weight negative", setWeight(good, 0, dest("exp", -5)), []string{"exp has negative weight -5"}},
		{"experiment and canary over the maximum", setWeight(good, 80, dest("exp", 25)), []string{"canary weight 80 plus experiment weights 25 exceed maxTrafficWeight 100"}},
		{"experiment Service is stable", setWeight(good, 0, dest("stable", 5)), []string{"experiment Service " + ns + "/stable is the stable or canary Service", "its own Service"}},
		// setHeaderRoute steps.
		{"header regex not RE2: unbalanced", header(good, "canary-header", hdr("X-Canary", v1alpha1.StringMatch{Regex: "(["})),
			[]string{`setHeaderRoute "canary-header"`, `regex "(["`, "not a valid RE2 regular expression", "fix the expression"}},
		{"header regex not RE2: lookahead", header(good, "canary-header", hdr("X-Canary", v1alpha1.StringMatch{Regex: "^(?=beta)"})),
			[]string{`setHeaderRoute "canary-header"`, `regex "^(?=beta)"`, "RE2"}},
		{"header name with a space", header(good, "canary-header", hdr("X Canary", v1alpha1.StringMatch{Exact: "yes"})), []string{`"X Canary" is not an HTTP header name`}},
		{"header value with a newline", header(good, "canary-header", hdr("X-Canary", v1alpha1.StringMatch{Exact: "yes\r\nX-Admin: 1"})), []string{"control character", "never match"}},
		{"header value with white space", header(good, "canary-header", hdr("X-Canary", v1alpha1.StringMatch{Exact: "yes "})), []string{"white space", "remove it"}},
		{"header value two ways", header(good, "canary-header", hdr("X-Canary", v1alpha1.StringMatch{Exact: "yes", Prefix: "y"})), []string{"exactly one of exact, prefix and regex"}},
		{"header without a value", header(good, "canary-header", v1alpha1.HeaderRoutingMatch{HeaderName: "X-Canary"}), []string{"has no value to match"}},
		{"header matched twice", header(good, "canary-header", hdr("X-Canary", v1alpha1.StringMatch{Exact: "a"}), hdr("x-canary", v1alpha1.StringMatch{Exact: "b"})), []string{"matched twice"}},
		{"step not in managedRoutes", header(good, "unlisted", hdr("X-Canary", v1alpha1.StringMatch{Exact: "yes"})), []string{`"unlisted" is not listed in spec.strategy.canary.trafficRouting.managedRoutes`, "add it there"}},
		{"managed route not a rule name", header(good, "Canary_Header", hdr("X-Canary", v1alpha1.StringMatch{Exact: "yes"})), []string{`"Canary_Header" is not a valid rule name`, "rename the managed route"}},
		{"step without a name", header(good, "", hdr("X-Canary", v1alpha1.StringMatch{Exact: "yes"})), []string{"step has no name"}},
		{"header value too long", header(good, "canary-header", hdr("X-Canary", v1alpha1.StringMatch{Exact: strings.Repeat("y", 4097)})), []string{"4097 bytes", "allows 4096"}},
		// setMirrorRoute steps.
		{"mirror percentage over 100", mirror(good, 150, path(v1alpha1.StringMatch{Prefix: "/api"})), []string{`setMirrorRoute "mirror"`, "percentage 150 is outside 0..100"}},
		{"mirror path regex not RE2", mirror(good, 50, path(v1alpha1.StringMatch{Regex: "/api/(v1"})), []string{`setMirrorRoute "mirror"`, `regex "/api/(v1"`, "RE2"}},
		{"mirror path not absolute", mirror(good, 50, path(v1alpha1.StringMatch{Exact: "api"})), []string{"HTTPRoute " + ns + "/good", `path "api" must start with /`}},
		{"mirror path with //", mirror(good, 50, path(v1alpha1.StringMatch{Prefix: "/api//v1"})), []string{`must not contain "//"`}},
		{"mirror method unknown", mirror(good, 50, v1alpha1.RouteMatch{Method: &v1alpha1.StringMatch{Exact: "FETCH"}}), []string{`method "FETCH" is not one of`}},
		{"mirror header regex not RE2", mirror(good, 50, v1alpha1.RouteMatch{Headers: map[string]v1alpha1.StringMatch{"X-Mirror": {Regex: "a{2,1}"}}}), []string{"header X-Mirror", "RE2"}},
		{"mirror gRPC method not a method", mirror(ro(`{"grpcRoute": "grpc"}`), 50, path(v1alpha1.StringMatch{Exact: "/pkg.Svc/Get-It"})),
			[]string{"GRPCRoute " + ns + "/grpc", `gRPC method "Get-It" is not a method name`}},
		// VerifyWeight takes the same split as SetWeight.
		{"VerifyWeight over maxTrafficWeight", func(p rolloutsrpc.TrafficRouterPlugin) rpcErr {
			_, err := p.VerifyWeight(ro(`{"httpRoute": "good", "verifyWeight": true}`, maxWeight(50)), 60, nil)
			return err
		}, []string{"VerifyWeight(60)", "weight 60 is outside 0..50"}},
	}
	t.Logf("%d bad inputs", len(corpus))
	if len(corpus) < 25 {
		t.Fatalf("the corpus has %d bad inputs; keep at least 25", len(corpus))
	}
	for _, tc := range corpus {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]string{}
			for name := range routesYAML {
				before[name] = get(t, standard, "v1", kindOf(name), ns, name).GetResourceVersion()
			}
			standard.Recorder.Reset()
			err := tc.call(p)
			if !err.HasError() {
				t.Fatalf("accepted, want an error mentioning %q", tc.want)
			}
			t.Logf("error: %s", err.ErrorString)
			if !strings.HasPrefix(err.ErrorString, "rollout "+ns+"/demo: ") {
				t.Errorf("error does not name the rollout: %s", err)
			}
			if strings.Contains(err.ErrorString, "internal error") {
				t.Errorf("the plugin panicked: %s", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.ErrorString, w) {
					t.Errorf("error does not mention %q", w)
				}
			}
			if w := pluginWrites(standard); len(w) != 0 {
				t.Errorf("the plugin wrote %v", w)
			}
			for name, rv := range before {
				if got := get(t, standard, "v1", kindOf(name), ns, name).GetResourceVersion(); got != rv {
					t.Errorf("route %s changed (resourceVersion %s → %s)", name, rv, got)
				}
			}
			if got := p.Type(); got != "GatewayAPI" {
				t.Fatalf("the plugin process no longer answers: Type() = %q", got)
			}
		})
	}
}

package compat

import (
	"fmt"
	"slices"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

// kindOrder is the order of a release's rows in the page.
var kindOrder = []string{"HTTPRoute", "GRPCRoute", "TCPRoute", "TLSRoute", "UDPRoute"}

// versionPreference is the order in which the plugin picks the version it
// reads and writes a kind in: v1 where the CRD serves it, else v1alpha2
// (v1beta1 for HTTPRoute, which every release here serves as v1).
var versionPreference = []string{"v1", "v1alpha2", "v1beta1"}

// routeKind is a route kind as one cluster serves it, with what its CRD's
// schema allows in the version the plugin uses.
type routeKind struct {
	Kind    string
	Version string
	// Matches says the kind's rules have matches: header and mirror steps apply.
	Matches bool
	// MaxRules is the CRD's limit of spec.rules (1 for v1 TCP, TLS and UDP routes).
	MaxRules int64
	// RuleNames says the CRD declares spec.rules[].name (standard from v1.4).
	RuleNames bool
	// MirrorPercent says it declares requestMirror.percent (standard from v1.3).
	MirrorPercent bool
}

// servedKinds lists the route kinds the cluster's Gateway API CRDs serve, in
// kindOrder, each at the version the plugin uses there.
func servedKinds(c *harness.Cluster) ([]routeKind, error) {
	var out []routeKind
	for _, crd := range c.GatewayCRDs {
		kind := crd.Spec.Names.Kind
		if !slices.Contains(kindOrder, kind) {
			continue
		}
		k, ok := kindOf(crd)
		if !ok {
			return nil, fmt.Errorf("%s serves none of %v", crd.Name, versionPreference)
		}
		out = append(out, k)
	}
	slices.SortFunc(out, func(a, b routeKind) int { return slices.Index(kindOrder, a.Kind) - slices.Index(kindOrder, b.Kind) })
	return out, nil
}

func kindOf(crd *apiextensionsv1.CustomResourceDefinition) (routeKind, bool) {
	for _, want := range versionPreference {
		for _, v := range crd.Spec.Versions {
			if v.Name != want || !v.Served {
				continue
			}
			rules := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["rules"]
			rule := rules.Items.Schema
			filter := rule.Properties["filters"].Items
			k := routeKind{Kind: crd.Spec.Names.Kind, Version: v.Name, MaxRules: *rules.MaxItems}
			_, k.Matches = rule.Properties["matches"]
			_, k.RuleNames = rule.Properties["name"]
			if filter != nil {
				_, k.MirrorPercent = filter.Schema.Properties["requestMirror"].Properties["percent"]
			}
			return k, true
		}
	}
	return routeKind{}, false
}

func (k routeKind) String() string { return k.Kind + " " + k.Version }

// resource is the kind's plural resource name.
func (k routeKind) resource() string { return strings.ToLower(k.Kind) + "s" }

// key is the kind's config key for one route by name: httpRoute, udpRoute.
func (k routeKind) key() string {
	return strings.ToLower(strings.TrimSuffix(k.Kind, "Route")) + "Route"
}

// route is what a cell starts from.
type route struct {
	// stable and canary are the Services of the weighted rule (ping and
	// pong for a ping-pong cell).
	stable, canary string
	// twoWeighted gives the weighted rule the name main and adds a second
	// weighted rule named other, where the CRD allows two rules (names only
	// where it declares them).
	twoWeighted bool
}

// manifest is the route a cell creates: what a user keeps in Git, with
// fields the plugin does not manage wherever the kind has them (labels,
// annotations, a parentRef with a sectionName, hostnames, a filter on the
// weighted rule, another team's backendRef in it, a rule of its own for
// static content), so that every cell proves they stay byte for byte.
func (k routeKind) manifest(r route) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: gateway.networking.k8s.io/%s
kind: %s
metadata:
  name: route
  labels: {team: shop}
  annotations: {example.com/owner: team-shop}
spec:
  parentRefs: [{name: gw, sectionName: %s}]
`, k.Version, k.Kind, strings.ToLower(strings.TrimSuffix(k.Kind, "Route")))
	switch k.Kind {
	case "HTTPRoute", "GRPCRoute", "TLSRoute":
		fmt.Fprintf(&b, "  hostnames: [%s.example.com]\n", strings.ToLower(strings.TrimSuffix(k.Kind, "Route")))
	}
	b.WriteString("  rules:\n")
	name := func(n string) string {
		if r.twoWeighted && k.RuleNames {
			return "name: " + n + "\n    "
		}
		return ""
	}
	refs := fmt.Sprintf("backendRefs:\n    - {name: %s, port: 80, weight: 100}\n    - {name: %s, port: 80, weight: 0}\n", r.stable, r.canary)
	switch k.Kind {
	case "HTTPRoute":
		fmt.Fprintf(&b, "  - %smatches: [{path: {type: PathPrefix, value: /}}]\n    filters: [%s]\n    %s    - {name: other-team, port: 80, weight: 7}\n", name("main"), viaGateway, refs)
		if r.twoWeighted {
			fmt.Fprintf(&b, "  - %smatches: [{path: {type: PathPrefix, value: /shop}}]\n    %s", name("other"), refs)
		}
		b.WriteString("  - matches: [{path: {type: PathPrefix, value: /static}}]\n    backendRefs: [{name: static, port: 80}]\n")
	case "GRPCRoute":
		fmt.Fprintf(&b, "  - %sfilters: [%s]\n    %s    - {name: other-team, port: 80, weight: 7}\n", name("main"), viaGateway, refs)
		if r.twoWeighted {
			fmt.Fprintf(&b, "  - %smatches: [{method: {service: shop.Cart}}]\n    %s", name("other"), refs)
		}
		b.WriteString("  - matches: [{method: {service: shop.Static}}]\n    backendRefs: [{name: static, port: 80}]\n")
	default:
		fmt.Fprintf(&b, "  - %s%s    - {name: other-team, port: 80, weight: 7}\n", name("main"), refs)
		if r.twoWeighted && k.MaxRules > 1 {
			fmt.Fprintf(&b, "  - %s%s", name("other"), refs)
		}
	}
	return b.String()
}

// viaGateway is the filter of the weighted rule of HTTP and gRPC routes.
const viaGateway = `{type: RequestHeaderModifier, requestHeaderModifier: {add: [{name: x-via, value: gateway}]}}`

// headerRule is the rule a setHeaderRoute step named beta matching
// X-Canary: yes adds: the weighted rule's matches with the header, its
// filters, the canary alone.
func (k routeKind) headerRule() string {
	matches := `[{path: {type: PathPrefix, value: /}, headers: [{name: X-Canary, type: Exact, value: "yes"}]}]`
	if k.Kind == "GRPCRoute" {
		matches = `[{headers: [{name: X-Canary, type: Exact, value: "yes"}]}]`
	}
	return k.named("beta") + `matches: ` + matches + `
filters: [` + viaGateway + `]
backendRefs: [{group: "", kind: Service, name: canary, port: 80, weight: 1}]
`
}

// mirrorRule is the rule a setMirrorRoute step named mirror adds in rule
// mode (for the step of mirrorStep): the step's matches, answered by stable,
// the weighted rule's filters and a RequestMirror filter to the canary.
func (k routeKind) mirrorRule(percent int32) string {
	matches := `[{path: {type: PathPrefix, value: /api}, method: GET}]`
	if k.Kind == "GRPCRoute" {
		matches = `[{headers: [{name: X-Mirror, type: Exact, value: "yes"}]}]`
	}
	return k.named("mirror") + `matches: ` + matches + `
filters: [` + viaGateway + `, ` + k.mirrorFilter(percent) + `]
backendRefs: [{group: "", kind: Service, name: stable, port: 80, weight: 1}]
`
}

// mirrorFilter is the RequestMirror filter to the canary that a mirror step
// with percent (0: none given) adds: without percent where the CRD has no
// such field and the step mirrors every request.
func (k routeKind) mirrorFilter(percent int32) string {
	if percent == 0 {
		percent = 100
	}
	pct := fmt.Sprintf(", percent: %d", percent)
	if !k.MirrorPercent && percent == 100 {
		pct = ""
	}
	return `{type: RequestMirror, requestMirror: {backendRef: {group: "", kind: Service, name: canary, port: 80}` + pct + `}}`
}

// named is the name line of an added rule, none where the CRD has no rule names.
func (k routeKind) named(name string) string {
	if !k.RuleNames {
		return ""
	}
	return "name: " + name + "\n"
}

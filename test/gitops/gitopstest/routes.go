package gitopstest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RouteName is the name of the route in Git and of the Rollout on it.
const RouteName = "web"

// Kind is a Gateway API route kind as the tests use it.
type Kind struct {
	Kind      string // HTTPRoute
	Resource  string // httproutes
	ConfigKey string // the plugin config key naming one route: httpRoute
	// Rules says whether the kind has more than one rule with matches and
	// filters (HTTPRoute, GRPCRoute); TCPRoute, TLSRoute and UDPRoute v1
	// have one rule.
	Rules bool
	// Hostnames says whether the kind has spec.hostnames.
	Hostnames bool
}

// Kinds are the five route kinds the plugin manages.
var Kinds = []Kind{
	{Kind: "HTTPRoute", Resource: "httproutes", ConfigKey: "httpRoute", Rules: true, Hostnames: true},
	{Kind: "GRPCRoute", Resource: "grpcroutes", ConfigKey: "grpcRoute", Rules: true, Hostnames: true},
	{Kind: "TCPRoute", Resource: "tcproutes", ConfigKey: "tcpRoute"},
	{Kind: "TLSRoute", Resource: "tlsroutes", ConfigKey: "tlsRoute", Hostnames: true},
	{Kind: "UDPRoute", Resource: "udproutes", ConfigKey: "udpRoute"},
}

// GVR is the kind's resource at v1.
func (k Kind) GVR() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: k.Resource}
}

// Git is the route as a person keeps it in Git, after the given changes.
type Git struct {
	// Stable and Canary are the weights of the rule the Rollout manages (Git
	// starts at 100 and 0).
	Stable, Canary int64
	// OutsideRules is a change outside spec.rules: a second hostname, or for
	// TCPRoute and UDPRoute (no hostnames) another listener in the parentRef.
	OutsideRules bool
	// OtherRuleFilter is a change inside spec.rules that the plugin does not
	// manage: a filter on the second rule (HTTPRoute and GRPCRoute only).
	OtherRuleFilter bool
}

// GitStart is the route as first committed: all traffic on stable.
var GitStart = Git{Stable: 100, Canary: 0}

// Route renders the Git route of kind k in namespace ns, with extra labels
// (a GitOps tool's own) if any.
func (g Git) Route(k Kind, ns string) *unstructured.Unstructured {
	backends := []any{
		map[string]any{"name": "stable", "port": int64(80), "weight": g.Stable},
		map[string]any{"name": "canary", "port": int64(80), "weight": g.Canary},
	}
	parent := map[string]any{"name": "gw"}
	spec := map[string]any{"parentRefs": []any{parent}}
	rules := []any{map[string]any{"backendRefs": backends}}
	if k.Hostnames {
		hosts := []any{"web.example.com"}
		if g.OutsideRules {
			hosts = append(hosts, "web.example.org")
		}
		spec["hostnames"] = hosts
	} else {
		listener := strings.ToLower(strings.TrimSuffix(k.Kind, "Route")) // tcp, udp
		parent["sectionName"] = listener
		if g.OutsideRules {
			parent["sectionName"] = listener + "-alt"
		}
	}
	if k.Rules {
		other := map[string]any{"backendRefs": []any{map[string]any{"name": "static", "port": int64(80)}}}
		if k.Kind == "HTTPRoute" {
			other["matches"] = []any{map[string]any{"path": map[string]any{"type": "PathPrefix", "value": "/static"}}}
		} else {
			other["matches"] = []any{map[string]any{"method": map[string]any{"service": "shop.Static"}}}
		}
		if g.OtherRuleFilter {
			header := map[string]any{"set": []any{map[string]any{"name": "x-cache", "value": "on"}}}
			other["filters"] = []any{map[string]any{"type": "RequestHeaderModifier", "requestHeaderModifier": header}}
		}
		rules = append(rules, other)
	}
	spec["rules"] = rules
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       k.Kind,
		"metadata":   map[string]any{"name": RouteName, "namespace": ns},
		"spec":       spec,
	}}
}

// Weights are the stable and canary weights of the route's first rule.
func Weights(u *unstructured.Unstructured) (stable, canary int64) {
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	if len(rules) == 0 {
		return -1, -1
	}
	refs, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "backendRefs")
	stable, canary = -1, -1
	for _, r := range refs {
		m := r.(map[string]any)
		w, _ := m["weight"].(int64)
		switch m["name"] {
		case "stable":
			stable = w
		case "canary":
			canary = w
		}
	}
	return stable, canary
}

// Namespace creates a namespace for one scenario.
func (d *Driver) Namespace(t *testing.T, name string) string {
	t.Helper()
	res := d.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "namespaces"})
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}}
	if _, err := res.Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", name, err)
	}
	return name
}

// Live reads the route of kind k in ns as stored.
func (d *Driver) Live(t *testing.T, k Kind, ns string) *unstructured.Unstructured {
	t.Helper()
	u, err := d.Dynamic.Resource(k.GVR()).Namespace(ns).Get(context.Background(), RouteName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading %s %s/%s: %v", k.Kind, ns, RouteName, err)
	}
	return u
}

// Owners lists "manager (operation)" for every managedFields entry that holds
// spec.rules, to say who owns the rules in a failure message.
func Owners(u *unstructured.Unstructured) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		if e.FieldsV1 != nil && strings.Contains(string(e.FieldsV1.Raw), `"f:rules"`) {
			out = append(out, fmt.Sprintf("%s (%s)", e.Manager, e.Operation))
		}
	}
	return out
}

// GitSpec is the spec the apiserver makes of the Git route (CRD defaults
// filled in), from a dry-run create under another name: what the live spec
// must equal once the GitOps tool has applied Git and the plugin has let go.
func (d *Driver) GitSpec(t *testing.T, k Kind, ns string, g Git) any {
	t.Helper()
	u := g.Route(k, ns)
	u.SetName(RouteName + "-dry-run")
	out, err := d.Dynamic.Resource(k.GVR()).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		t.Fatalf("dry-run create of Git's %s in %s: %v", k.Kind, ns, err)
	}
	return out.Object["spec"]
}

// Leftovers lists what the plugin left on a route after its rollout ended:
// its managedFields entry, its claims annotation, its in-progress label.
func Leftovers(u *unstructured.Unstructured, fieldManager string) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		if e.Manager == fieldManager {
			out = append(out, fmt.Sprintf("a managedFields entry of %s (%s)", e.Manager, e.Operation))
		}
	}
	if v, ok := u.GetAnnotations()["gatewayapi-ssa.dev/claims"]; ok {
		out = append(out, "the claims annotation "+v)
	}
	if v, ok := u.GetLabels()["rollouts.argoproj.io/gatewayapi-canary"]; ok {
		out = append(out, "the in-progress label ("+v+")")
	}
	return out
}

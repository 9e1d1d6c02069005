package routes

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Group is the API group of every route kind.
const Group = "gateway.networking.k8s.io"

// Kind is a Gateway API route kind the plugin manages.
type Kind string

const (
	HTTPRoute Kind = "HTTPRoute"
	GRPCRoute Kind = "GRPCRoute"
	TCPRoute  Kind = "TCPRoute"
	TLSRoute  Kind = "TLSRoute"
	UDPRoute  Kind = "UDPRoute"
)

// Kinds lists every kind in the order the plugin processes them.
var Kinds = []Kind{HTTPRoute, GRPCRoute, TCPRoute, TLSRoute, UDPRoute}

// Resource is the kind's plural resource name.
func (k Kind) Resource() string {
	switch k {
	case HTTPRoute:
		return "httproutes"
	case GRPCRoute:
		return "grpcroutes"
	case TCPRoute:
		return "tcproutes"
	case TLSRoute:
		return "tlsroutes"
	case UDPRoute:
		return "udproutes"
	}
	return ""
}

// HasMatches says whether the kind's rules have matches (HTTPRoute and
// GRPCRoute), and so can take header and mirror rules and mirror filters.
func (k Kind) HasMatches() bool { return k == HTTPRoute || k == GRPCRoute }

// GroupResource is the kind's resource with its group, as RBAC names it in
// errors: httproutes.gateway.networking.k8s.io.
func (k Kind) GroupResource() string { return k.Resource() + "." + Group }

// Versions lists the API versions the plugin can read and write for the kind,
// preferred first. TCPRoute and UDPRoute are v1 from Gateway API 1.6, TLSRoute
// from 1.5; older installs serve only v1alpha2 (experimental channel).
func (k Kind) Versions() []string {
	switch k {
	case HTTPRoute:
		return []string{"v1", "v1beta1"}
	case GRPCRoute, TCPRoute, TLSRoute, UDPRoute:
		return []string{"v1", "v1alpha2"}
	}
	return nil
}

// GVR is the kind's resource in the given version.
func (k Kind) GVR(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: Group, Version: version, Resource: k.Resource()}
}

// Ref names one route.
type Ref struct {
	Kind      Kind
	Namespace string
	Name      string
}

func (r Ref) String() string { return fmt.Sprintf("%s %s/%s", r.Kind, r.Namespace, r.Name) }

// Targets are the routes a rollout manages: by name and by label selector.
type Targets struct {
	Named     []Ref
	Selectors []Selection
}

// Selection is every route of one kind in a namespace whose labels match.
type Selection struct {
	Kind      Kind
	Namespace string
	Selector  labels.Selector
}

// Key is the key of the Rollout's plugin config that gives the selector,
// e.g. httpRouteSelector.
func (s Selection) Key() string {
	return strings.ToLower(strings.TrimSuffix(string(s.Kind), "Route")) + "RouteSelector"
}

func (s Selection) String() string {
	return fmt.Sprintf("%s selector %q in namespace %s", s.Kind, s.Selector.String(), s.Namespace)
}

package ssa

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gwv1a2ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1alpha2"
	gwv1b1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1beta1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// apply sends one server-side apply of the desired rules and labels for the
// live route, guarded by the live resourceVersion, and returns the route the
// apiserver stored.
func apply(ctx context.Context, client gateway.Interface, live routes.Route, d Desired, opts metav1.ApplyOptions) (routes.Route, error) {
	name, ns, rv := live.Name, live.Namespace, live.ResourceVersion
	var obj runtime.Object
	var err error
	switch {
	case live.Kind == routes.HTTPRoute && live.Version == "v1":
		var rules []gwv1ac.HTTPRouteRuleApplyConfiguration
		if err = decodeRules(d.Rules, &rules); err == nil {
			ac := gwv1ac.HTTPRoute(name, ns).WithResourceVersion(rv).WithLabels(d.Labels).WithAnnotations(d.Annotations).
				WithSpec(gwv1ac.HTTPRouteSpec().WithRules(pointers(rules)...))
			obj, err = client.GatewayV1().HTTPRoutes(ns).Apply(ctx, ac, opts)
		}
	case live.Kind == routes.HTTPRoute && live.Version == "v1beta1":
		var rules []gwv1ac.HTTPRouteRuleApplyConfiguration
		if err = decodeRules(d.Rules, &rules); err == nil {
			ac := gwv1b1ac.HTTPRoute(name, ns).WithResourceVersion(rv).WithLabels(d.Labels).WithAnnotations(d.Annotations).
				WithSpec(gwv1ac.HTTPRouteSpec().WithRules(pointers(rules)...))
			obj, err = client.GatewayV1beta1().HTTPRoutes(ns).Apply(ctx, ac, opts)
		}
	case live.Kind == routes.GRPCRoute && live.Version == "v1":
		var rules []gwv1ac.GRPCRouteRuleApplyConfiguration
		if err = decodeRules(d.Rules, &rules); err == nil {
			ac := gwv1ac.GRPCRoute(name, ns).WithResourceVersion(rv).WithLabels(d.Labels).WithAnnotations(d.Annotations).
				WithSpec(gwv1ac.GRPCRouteSpec().WithRules(pointers(rules)...))
			obj, err = client.GatewayV1().GRPCRoutes(ns).Apply(ctx, ac, opts)
		}
	case live.Kind == routes.GRPCRoute && live.Version == "v1alpha2":
		var rules []gwv1ac.GRPCRouteRuleApplyConfiguration
		if err = decodeRules(d.Rules, &rules); err == nil {
			ac := gwv1a2ac.GRPCRoute(name, ns).WithResourceVersion(rv).WithLabels(d.Labels).WithAnnotations(d.Annotations).
				WithSpec(gwv1ac.GRPCRouteSpec().WithRules(pointers(rules)...))
			obj, err = client.GatewayV1alpha2().GRPCRoutes(ns).Apply(ctx, ac, opts)
		}
	case live.Kind == routes.TCPRoute && live.Version == "v1":
		var rules []gwv1ac.TCPRouteRuleApplyConfiguration
		if err = decodeRules(d.Rules, &rules); err == nil {
			ac := gwv1ac.TCPRoute(name, ns).WithResourceVersion(rv).WithLabels(d.Labels).WithAnnotations(d.Annotations).
				WithSpec(gwv1ac.TCPRouteSpec().WithRules(pointers(rules)...))
			obj, err = client.GatewayV1().TCPRoutes(ns).Apply(ctx, ac, opts)
		}
	case live.Kind == routes.TCPRoute && live.Version == "v1alpha2":
		var rules []gwv1a2ac.TCPRouteRuleApplyConfiguration
		if err = decodeRules(d.Rules, &rules); err == nil {
			ac := gwv1a2ac.TCPRoute(name, ns).WithResourceVersion(rv).WithLabels(d.Labels).WithAnnotations(d.Annotations).
				WithSpec(gwv1a2ac.TCPRouteSpec().WithRules(pointers(rules)...))
			obj, err = client.GatewayV1alpha2().TCPRoutes(ns).Apply(ctx, ac, opts)
		}
	case live.Kind == routes.TLSRoute && live.Version == "v1":
		var rules []gwv1ac.TLSRouteRuleApplyConfiguration
		if err = decodeRules(d.Rules, &rules); err == nil {
			ac := gwv1ac.TLSRoute(name, ns).WithResourceVersion(rv).WithLabels(d.Labels).WithAnnotations(d.Annotations).
				WithSpec(gwv1ac.TLSRouteSpec().WithRules(pointers(rules)...))
			obj, err = client.GatewayV1().TLSRoutes(ns).Apply(ctx, ac, opts)
		}
	case live.Kind == routes.TLSRoute && live.Version == "v1alpha2":
		var rules []gwv1a2ac.TLSRouteRuleApplyConfiguration
		if err = decodeRules(d.Rules, &rules); err == nil {
			ac := gwv1a2ac.TLSRoute(name, ns).WithResourceVersion(rv).WithLabels(d.Labels).WithAnnotations(d.Annotations).
				WithSpec(gwv1a2ac.TLSRouteSpec().WithRules(pointers(rules)...))
			obj, err = client.GatewayV1alpha2().TLSRoutes(ns).Apply(ctx, ac, opts)
		}
	default:
		return routes.Route{}, fmt.Errorf("writing %s in version %s is not supported", live.Kind, live.Version)
	}
	if err != nil {
		return routes.Route{}, err
	}
	return toRoute(obj, live)
}

// decodeRules fills the typed apply configurations from the rules' JSON and
// refuses rules the types cannot carry exactly: spec.rules is atomic, so a
// field lost here would be deleted from the route.
func decodeRules(rules []routes.Rule, into any) error {
	data, err := json.Marshal(rules)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		return &UnrepresentableError{Reason: err.Error()}
	}
	back, err := json.Marshal(into)
	if err != nil {
		return err
	}
	var want, got []any
	if err := json.Unmarshal(data, &want); err != nil {
		return err
	}
	if err := json.Unmarshal(back, &got); err != nil {
		return err
	}
	for i := range want {
		if i >= len(got) || !reflect.DeepEqual(pruneEmpty(want[i]), pruneEmpty(got[i])) {
			return &UnrepresentableError{Reason: fmt.Sprintf("rule %d does not survive conversion to the typed apply configuration", i)}
		}
	}
	return nil
}

// pruneEmpty drops null values and empty lists and objects, which the typed
// apply configurations omit and which mean the same as an absent field.
func pruneEmpty(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			if p := pruneEmpty(e); p != nil {
				out[k] = p
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(t) == 0 {
			return nil
		}
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = pruneEmpty(e)
		}
		return out
	}
	return v
}

func pointers[T any](items []T) []*T {
	out := make([]*T, len(items))
	for i := range items {
		out[i] = &items[i]
	}
	return out
}

// toRoute turns the typed object an apply returned into the plugin's Route.
func toRoute(obj runtime.Object, live routes.Route) (routes.Route, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return routes.Route{}, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion(routes.Group + "/" + live.Version)
	u.SetKind(string(live.Kind))
	return routes.FromUnstructured(u)
}

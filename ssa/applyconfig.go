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
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1a2 "sigs.k8s.io/gateway-api/apis/v1alpha2"
	gwv1b1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gwv1a2ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1alpha2"
	gwv1b1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1beta1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// applyClient is the Apply method every typed route client has.
type applyClient[AC any, T runtime.Object] interface {
	Apply(ctx context.Context, ac AC, opts metav1.ApplyOptions) (T, error)
}

// applyFunc sends one apply of a desired route.
type applyFunc func(ctx context.Context, c gateway.Interface, live routes.Route, d desired.Result, opts metav1.ApplyOptions) (runtime.Object, error)

type kindVersion struct {
	kind    routes.Kind
	version string
}

// typedApply is the apply of one kind in one version: it fills the kind's
// typed apply configuration AC (refusing what it cannot carry exactly) and
// sends it with the client of that kind.
func typedApply[AC any, T runtime.Object](client func(c gateway.Interface, namespace string) applyClient[*AC, T]) applyFunc {
	return func(ctx context.Context, c gateway.Interface, live routes.Route, d desired.Result, opts metav1.ApplyOptions) (runtime.Object, error) {
		ac := new(AC)
		if err := fillApplyConfig(live, d, ac); err != nil {
			return nil, err
		}
		obj, err := client(c, live.Namespace).Apply(ctx, ac, opts)
		if err != nil {
			return nil, err
		}
		return obj, nil
	}
}

// applies lists every kind and version the plugin writes.
var applies = map[kindVersion]applyFunc{
	{routes.HTTPRoute, "v1"}: typedApply(func(c gateway.Interface, ns string) applyClient[*gwv1ac.HTTPRouteApplyConfiguration, *gwv1.HTTPRoute] {
		return c.GatewayV1().HTTPRoutes(ns)
	}),
	{routes.HTTPRoute, "v1beta1"}: typedApply(func(c gateway.Interface, ns string) applyClient[*gwv1b1ac.HTTPRouteApplyConfiguration, *gwv1b1.HTTPRoute] {
		return c.GatewayV1beta1().HTTPRoutes(ns)
	}),
	{routes.GRPCRoute, "v1"}: typedApply(func(c gateway.Interface, ns string) applyClient[*gwv1ac.GRPCRouteApplyConfiguration, *gwv1.GRPCRoute] {
		return c.GatewayV1().GRPCRoutes(ns)
	}),
	{routes.GRPCRoute, "v1alpha2"}: typedApply(func(c gateway.Interface, ns string) applyClient[*gwv1a2ac.GRPCRouteApplyConfiguration, *gwv1a2.GRPCRoute] {
		return c.GatewayV1alpha2().GRPCRoutes(ns)
	}),
	{routes.TCPRoute, "v1"}: typedApply(func(c gateway.Interface, ns string) applyClient[*gwv1ac.TCPRouteApplyConfiguration, *gwv1.TCPRoute] {
		return c.GatewayV1().TCPRoutes(ns)
	}),
	{routes.TCPRoute, "v1alpha2"}: typedApply(func(c gateway.Interface, ns string) applyClient[*gwv1a2ac.TCPRouteApplyConfiguration, *gwv1a2.TCPRoute] {
		return c.GatewayV1alpha2().TCPRoutes(ns)
	}),
	{routes.TLSRoute, "v1"}: typedApply(func(c gateway.Interface, ns string) applyClient[*gwv1ac.TLSRouteApplyConfiguration, *gwv1.TLSRoute] {
		return c.GatewayV1().TLSRoutes(ns)
	}),
	{routes.TLSRoute, "v1alpha2"}: typedApply(func(c gateway.Interface, ns string) applyClient[*gwv1a2ac.TLSRouteApplyConfiguration, *gwv1a2.TLSRoute] {
		return c.GatewayV1alpha2().TLSRoutes(ns)
	}),
}

// apply sends one server-side apply of the desired rules and labels for the
// live route, guarded by the live resourceVersion, and returns the route the
// apiserver stored.
func apply(ctx context.Context, client gateway.Interface, live routes.Route, d desired.Result, opts metav1.ApplyOptions) (routes.Route, error) {
	send, ok := applies[kindVersion{live.Kind, live.Version}]
	if !ok {
		return routes.Route{}, fmt.Errorf("writing %s in version %s is not supported", live.Kind, live.Version)
	}
	obj, err := send(ctx, client, live, d, opts)
	if err != nil {
		return routes.Route{}, err
	}
	return toRoute(obj, live)
}

// fillApplyConfig fills a typed apply configuration with the route's
// identity, the resourceVersion it was read at, the plugin's labels and
// annotations and the desired rules, and refuses rules the types cannot carry
// exactly: spec.rules is atomic, so a field lost here would be deleted from
// the route.
func fillApplyConfig(live routes.Route, d desired.Result, ac any) error {
	meta := map[string]any{"name": live.Name, "namespace": live.Namespace, "resourceVersion": live.ResourceVersion}
	if d.Labels != nil {
		meta["labels"] = d.Labels
	}
	if d.Annotations != nil {
		meta["annotations"] = d.Annotations
	}
	obj := map[string]any{
		"apiVersion": routes.Group + "/" + live.Version,
		"kind":       string(live.Kind),
		"metadata":   meta,
		"spec":       map[string]any{"rules": d.Rules},
	}
	return decodeLossless(obj, ac, func(v any) []any {
		spec, _ := v.(map[string]any)["spec"].(map[string]any)
		rules, _ := spec["rules"].([]any)
		return rules
	})
}

// decodeLossless fills into from v's JSON, and refuses what into's types
// cannot carry: an unknown field, or a rule (as rulesOf finds them in the
// JSON form) that does not come back the same.
func decodeLossless(v any, into any, rulesOf func(any) []any) error {
	data, err := json.Marshal(v)
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
	var want, got any
	if err := json.Unmarshal(data, &want); err != nil {
		return err
	}
	if err := json.Unmarshal(back, &got); err != nil {
		return err
	}
	wantRules, gotRules := rulesOf(want), rulesOf(got)
	for i := range wantRules {
		if i >= len(gotRules) || !reflect.DeepEqual(pruneEmpty(wantRules[i]), pruneEmpty(gotRules[i])) {
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

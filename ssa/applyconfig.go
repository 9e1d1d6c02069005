package ssa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
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

// applyFunc sends one apply of a desired route, given as the object to apply.
type applyFunc func(ctx context.Context, c gateway.Interface, live routes.Route, obj map[string]any, opts metav1.ApplyOptions) (runtime.Object, error)

type kindVersion struct {
	kind    routes.Kind
	version string
}

// typedApply is the apply of one kind in one version: it fills the kind's
// typed apply configuration AC from the object to apply (an
// UnrepresentableError if it cannot carry it exactly, nothing sent) and sends
// it with the client of that kind.
func typedApply[AC any, T runtime.Object](client func(c gateway.Interface, namespace string) applyClient[*AC, T]) applyFunc {
	return func(ctx context.Context, c gateway.Interface, live routes.Route, obj map[string]any, opts metav1.ApplyOptions) (runtime.Object, error) {
		ac := new(AC)
		if err := decodeLossless(obj, ac, rulesOf); err != nil {
			return nil, err
		}
		stored, err := client(c, live.Namespace).Apply(ctx, ac, opts)
		if err != nil {
			return nil, err
		}
		return stored, nil
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
// apiserver stored. It applies the kind's typed apply configuration; when
// that cannot carry the route's rules exactly (a field a newer Gateway API
// added, which the typed apply would delete), it applies the same object
// unstructured, with the same options, and says why in unstructured.
func apply(ctx context.Context, client gateway.Interface, dyn dynamic.Interface, live routes.Route, d desired.Result, opts metav1.ApplyOptions) (stored routes.Route, unstructuredWhy string, err error) {
	send, ok := applies[kindVersion{live.Kind, live.Version}]
	if !ok {
		return routes.Route{}, "", fmt.Errorf("writing %s in version %s is not supported", live.Kind, live.Version)
	}
	obj, err := applyObject(live, d)
	if err != nil {
		return routes.Route{}, "", err
	}
	typed, err := send(ctx, client, live, obj, opts)
	var unrep *UnrepresentableError
	if !errors.As(err, &unrep) {
		if err != nil {
			return routes.Route{}, "", err
		}
		stored, err := toRoute(typed, live)
		return stored, "", err
	}
	u, err := dyn.Resource(live.Kind.GVR(live.Version)).Namespace(live.Namespace).Apply(ctx, live.Name, &unstructured.Unstructured{Object: obj}, opts)
	if err != nil {
		return routes.Route{}, unrep.Reason, err
	}
	stored, err = routes.FromUnstructured(u)
	return stored, unrep.Reason, err
}

// fillApplyConfig fills a typed apply configuration from applyObject, and
// refuses rules the types cannot carry exactly (UnrepresentableError).
func fillApplyConfig(live routes.Route, d desired.Result, ac any) error {
	obj, err := applyObject(live, d)
	if err != nil {
		return err
	}
	return decodeLossless(obj, ac, rulesOf)
}

// applyObject is what the plugin applies to a route, in its JSON form: the
// route's identity, the resourceVersion it was read at (the precondition),
// the plugin's labels and annotations and the desired rules.
func applyObject(live routes.Route, d desired.Result) (map[string]any, error) {
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
	// In plain JSON values, as an unstructured object holds them; numbers
	// keep their digits.
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out map[string]any
	return out, dec.Decode(&out)
}

// rulesOf finds spec.rules in the JSON form of a route.
func rulesOf(v any) []any {
	spec, _ := v.(map[string]any)["spec"].(map[string]any)
	rules, _ := spec["rules"].([]any)
	return rules
}

// decodeLossless fills into from v's JSON, and refuses what into's types
// cannot carry: a rule (as rulesOf finds them in the JSON form) that does not
// come back the same, or an unknown field anywhere. The error names every
// field of the rules the types would lose.
func decodeLossless(v any, into any, rulesOf func(any) []any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var want any
	if err := json.Unmarshal(data, &want); err != nil {
		return err
	}
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	strictErr := strict.Decode(into)
	decoded := into
	if strictErr != nil {
		// Decode again, keeping what the types know, to say what they do not.
		decoded = reflect.New(reflect.TypeOf(into).Elem()).Interface()
		if err := json.Unmarshal(data, decoded); err != nil {
			return &UnrepresentableError{Reason: strictErr.Error()}
		}
	}
	back, err := json.Marshal(decoded)
	if err != nil {
		return err
	}
	var got any
	if err := json.Unmarshal(back, &got); err != nil {
		return err
	}
	var lost []string
	wantRules, gotRules := rulesOf(want), rulesOf(got)
	for i := range wantRules {
		var g any
		if i < len(gotRules) {
			g = gotRules[i]
		}
		lost = append(lost, lostFields(pruneEmpty(wantRules[i]), pruneEmpty(g), fmt.Sprintf("spec.rules[%d]", i))...)
	}
	switch {
	case len(lost) > 0:
		return &UnrepresentableError{Reason: strings.Join(lost, ", ")}
	case strictErr != nil:
		return &UnrepresentableError{Reason: strictErr.Error()}
	}
	return nil
}

// lostFields lists the paths (below path) of what want holds and got does
// not hold the same.
func lostFields(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, _ := got.(map[string]any)
		var out []string
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if gv, ok := g[k]; ok {
				out = append(out, lostFields(w[k], gv, path+"."+k)...)
			} else {
				out = append(out, path+"."+k)
			}
		}
		return out
	case []any:
		g, _ := got.([]any)
		var out []string
		for i := range w {
			at := fmt.Sprintf("%s[%d]", path, i)
			if i < len(g) {
				out = append(out, lostFields(w[i], g[i], at)...)
			} else {
				out = append(out, at)
			}
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{path}
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

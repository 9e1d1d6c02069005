package kube

import (
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// decodeRoute reads a route from the JSON the apiserver serves (an answer, or the
// object of a watch event) straight into a Route: one pass over the bytes
// into the fields the plugin reads, with managedFields kept as the raw field
// sets they are served as, instead of a map of the whole object that the
// plugin then reads again. It gives the Route routes.FromUnstructured gives for the
// same object (a fuzz target and the tests hold it to that); an object the
// one pass cannot read exactly (a field of an unexpected JSON type, a label
// that is not a string) is read the long way, which also says what is wrong
// with it.
func decodeRoute(data []byte) (routes.Route, error) {
	if r, ok := decodeFast(data); ok {
		return r, nil
	}
	u := &unstructured.Unstructured{}
	if err := unmarshalServed(u, data); err != nil {
		return routes.Route{}, fmt.Errorf("reading a route: %w", err)
	}
	return routes.FromUnstructuredNoCopy(u)
}

// unmarshalServed reads a served object into u. Unstructured's own error for
// an object without kind or apiVersion quotes the whole object: whatever
// the apiserver answered must never reach an error, a log or an Event.
func unmarshalServed(u *unstructured.Unstructured, data []byte) error {
	err := u.UnmarshalJSON(data)
	if runtime.IsMissingKind(err) || runtime.IsMissingVersion(err) {
		return errors.New("the answer is an object without a kind or an apiVersion, not a route")
	}
	return err
}

// served is the part of a served route the plugin reads. Labels and
// annotations are read as any, so that a value that is not a string sends
// the object the long way, as it does not decode the same into a string.
type served struct {
	servedType
	Metadata struct {
		servedName
		Generation    int64                       `json:"generation"`
		ManagedFields []metav1.ManagedFieldsEntry `json:"managedFields"`
	} `json:"metadata"`
	Spec struct {
		Rules      []any `json:"rules"`
		ParentRefs []any `json:"parentRefs"`
	} `json:"spec"`
	Status struct {
		Parents []any `json:"parents"`
	} `json:"status"`
}

// servedType is a served object's apiVersion and kind.
type servedType struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// servedName is what names a served object and what a selector reads of
// it.
type servedName struct {
	Name            string         `json:"name"`
	Namespace       string         `json:"namespace"`
	UID             types.UID      `json:"uid"`
	ResourceVersion string         `json:"resourceVersion"`
	Labels          map[string]any `json:"labels"`
	Annotations     map[string]any `json:"annotations"`
}

// ref is the route the object is, and its version; ok is false for an
// object that is no route kind of the group.
func (t servedType) ref(m servedName) (ref routes.Ref, version string, ok bool) {
	gv, err := schema.ParseGroupVersion(t.APIVersion)
	kind := routes.Kind(t.Kind)
	if err != nil || gv.Group != routes.Group || kind.Resource() == "" {
		return routes.Ref{}, "", false
	}
	return routes.Ref{Kind: kind, Namespace: m.Namespace, Name: m.Name}, gv.Version, true
}

// decodeFast is the one pass; ok is false for anything it does not read
// exactly as routes.FromUnstructured would.
func decodeFast(data []byte) (routes.Route, bool) {
	var s served
	// Case-sensitive keys and integers kept as int64, as the apiserver's
	// JSON decodes into an unstructured object.
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &s); err != nil {
		return routes.Route{}, false
	}
	return s.route()
}

// route is the Route s holds; ok is false for anything routes.FromUnstructured
// would read otherwise.
func (s *served) route() (routes.Route, bool) {
	m := s.Metadata
	ref, version, ok := s.ref(m.servedName)
	if !ok {
		return routes.Route{}, false
	}
	labels, ok := stringMap(m.Labels)
	if !ok {
		return routes.Route{}, false
	}
	annotations, ok := stringMap(m.Annotations)
	if !ok {
		return routes.Route{}, false
	}
	// A managedFields entry of null decodes as an empty one, as {} does; the
	// long way refuses null (entry i is <nil>, not an object) and reads {}
	// as the empty entry, so an empty entry is read the long way.
	if slices.Contains(m.ManagedFields, metav1.ManagedFieldsEntry{}) {
		return routes.Route{}, false
	}
	r := routes.Route{
		Ref:             ref,
		UID:             m.UID,
		Version:         version,
		ResourceVersion: m.ResourceVersion,
		Generation:      m.Generation,
		Labels:          labels,
		Annotations:     annotations,
		ManagedFields:   routes.NewManagedFields(m.ManagedFields),
		Parents:         routes.ParentsFrom(m.Namespace, s.Spec.ParentRefs, s.Status.Parents),
	}
	if s.Spec.Rules != nil {
		r.Rules = make([]routes.Rule, len(s.Spec.Rules))
		for i, item := range s.Spec.Rules {
			rule, ok := item.(map[string]any)
			if !ok {
				return routes.Route{}, false
			}
			r.Rules[i] = rule
		}
	}
	return r, true
}

// stringMap is m with string values, as GetLabels reads it: nil for nil, ok
// false if a value is not a string.
func stringMap(m map[string]any) (map[string]string, bool) {
	if m == nil {
		return nil, true
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		out[k] = s
	}
	return out, true
}

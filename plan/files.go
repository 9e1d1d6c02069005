package plan

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Files is a Reader over routes (and Services and ServiceImports) read from
// YAML files, for a plan that needs no cluster.
type Files struct {
	routes   map[routes.Ref]routes.Route
	services map[string][]corev1.ServicePort // "<namespace>/<name>"
	// imports are the ServiceImports of the files.
	imports map[routes.ObjectRef]bool
	// schemas are the route CRDs' schemas, by kind and version, when the
	// files hold CRDs; without them the routes have every field.
	schemas map[routes.Kind]map[string]routes.Schema
	// parents are the GatewayClasses, Gateways and ListenerSets of the
	// files: a plan checks what the steps need of them.
	parents kube.ParentIndex
	// grants are the ReferenceGrants of the files, by namespace.
	grants map[string][]routes.ReferenceGrant
	// predecessors are the argoproj-labs plugin's ConfigMaps of the files,
	// by namespace/name.
	predecessors map[string]routes.PredecessorRecords
}

// ReadFiles reads routes and Services from YAML documents (other kinds are
// skipped). A route without a namespace is in namespace.
func ReadFiles(namespace string, docs ...io.Reader) (*Files, error) {
	f := &Files{routes: map[routes.Ref]routes.Route{}, services: map[string][]corev1.ServicePort{}, schemas: map[routes.Kind]map[string]routes.Schema{},
		imports: map[routes.ObjectRef]bool{}}
	if err := f.Read(namespace, docs...); err != nil {
		return nil, err
	}
	return f, nil
}

// Read reads more YAML documents into the files: routes, Services, and the
// route kinds' CustomResourceDefinitions, whose schemas the routes then
// carry.
func (f *Files) Read(namespace string, docs ...io.Reader) error {
	for _, doc := range docs {
		dec := utilyaml.NewYAMLReader(bufio.NewReader(doc))
		for {
			raw, err := dec.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return err
			}
			if len(bytes.TrimSpace(raw)) == 0 {
				continue
			}
			if err := f.add(namespace, raw); err != nil {
				return err
			}
		}
	}
	return nil
}

// add reads one YAML document into the files: a route, a route kind's
// CRD, a GatewayClass, Gateway or ListenerSet, a Service, a
// ReferenceGrant, the argoproj-labs plugin's ConfigMap or a ServiceImport;
// any other object is skipped. An object without a namespace is in
// namespace.
func (f *Files) add(namespace string, raw []byte) error {
	u := &unstructured.Unstructured{}
	if err := utilyaml.Unmarshal(raw, &u.Object); err != nil {
		return fmt.Errorf("not a Kubernetes object: %w", err)
	}
	if u.Object == nil {
		return nil
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(namespace)
	}
	gvk := u.GroupVersionKind()
	switch {
	case gvk.Group == routes.Group && routes.Kind(gvk.Kind).Resource() != "":
		r, err := routes.FromUnstructured(u)
		if err != nil {
			return err
		}
		f.routes[r.Ref] = r
	case gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
		return f.addCRD(u)
	case gvk.Kind == "GatewayClass" || gvk.Kind == "Gateway" || gvk.Kind == "ListenerSet" || gvk.Kind == "XListenerSet":
		return f.addParent(u)
	case gvk.Group == "" && gvk.Kind == "Service":
		var svc corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &svc); err != nil {
			return fmt.Errorf("reading Service %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		f.services[svc.Namespace+"/"+svc.Name] = svc.Spec.Ports
	case gvk.Group == routes.Group && gvk.Kind == "ReferenceGrant":
		return f.addGrant(u)
	case gvk.Group == "" && gvk.Kind == "ConfigMap":
		return f.addPredecessorRecords(u)
	case gvk.Kind == "ServiceImport":
		f.imports[routes.ObjectRef{Group: gvk.Group, Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}] = true
	}
	return nil
}

// addCRD keeps the schemas of a route kind's CustomResourceDefinition; a
// CRD of another kind is skipped.
func (f *Files) addCRD(u *unstructured.Unstructured) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	kind, schemas, err := routes.SchemasFromCRD(data)
	if err != nil {
		return fmt.Errorf("CustomResourceDefinition %s: %w", u.GetName(), err)
	}
	if kind != "" {
		f.schemas[kind] = schemas
	}
	return nil
}

// addParent keeps a GatewayClass, Gateway or ListenerSet among the
// parents.
func (f *Files) addParent(u *unstructured.Unstructured) error {
	data, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	if _, err := f.parents.Add(data); err != nil {
		return fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// addGrant keeps a ReferenceGrant, by its namespace.
func (f *Files) addGrant(u *unstructured.Unstructured) error {
	g, err := referenceGrant(u)
	if err != nil {
		return fmt.Errorf("ReferenceGrant %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	if f.grants == nil {
		f.grants = map[string][]routes.ReferenceGrant{}
	}
	f.grants[g.Namespace] = append(f.grants[g.Namespace], g)
	return nil
}

// addPredecessorRecords keeps what a ConfigMap records as the
// argoproj-labs plugin's, by namespace/name.
func (f *Files) addPredecessorRecords(u *unstructured.Unstructured) error {
	data, _, _ := unstructured.NestedStringMap(u.Object, "data")
	records, err := routes.ReadPredecessorRecords(data)
	if err != nil {
		return fmt.Errorf("ConfigMap %s/%s: %w", u.GetNamespace(), u.GetName(), err)
	}
	if f.predecessors == nil {
		f.predecessors = map[string]routes.PredecessorRecords{}
	}
	f.predecessors[u.GetNamespace()+"/"+u.GetName()] = records
	return nil
}

// referenceGrant reads a ReferenceGrant of the files.
func referenceGrant(u *unstructured.Unstructured) (routes.ReferenceGrant, error) {
	var g routes.ReferenceGrant
	spec, _, _ := unstructured.NestedMap(u.Object, "spec")
	data, err := json.Marshal(spec)
	if err == nil {
		err = json.Unmarshal(data, &g)
	}
	g.Namespace, g.Name = u.GetNamespace(), u.GetName()
	return g, err
}

// ReferenceGrants answers with the ReferenceGrants of the files.
func (f *Files) ReferenceGrants(_ context.Context, namespace string) ([]routes.ReferenceGrant, error) {
	return f.grants[namespace], nil
}

// PredecessorRecords answers with the ConfigMaps of the files.
func (f *Files) PredecessorRecords(_ context.Context, namespace, name string) (routes.PredecessorRecords, error) {
	return f.predecessors[namespace+"/"+name], nil
}

// ServiceImported answers from the ServiceImports of the files.
func (f *Files) ServiceImported(_ context.Context, ref routes.ObjectRef) (bool, error) {
	return f.imports[ref], nil
}

// Get returns the route as read.
func (f *Files) Get(_ context.Context, ref routes.Ref) (routes.Route, error) {
	r, ok := f.routes[ref]
	if !ok {
		return routes.Route{}, apierrors.NewNotFound(schema.GroupResource{Group: routes.Group, Resource: ref.Kind.Resource()}, ref.Name)
	}
	return f.withSchema(r.DeepCopy()), nil
}

// withSchema gives a route its CRD's schema, if the files hold that CRD.
func (f *Files) withSchema(r routes.Route) routes.Route {
	r.Schema = f.schemas[r.Kind][r.Version]
	return r
}

// ResourceVersion is the route's as read, "" if the files hold none.
func (f *Files) ResourceVersion(_ context.Context, ref routes.Ref) string {
	return f.routes[ref].ResourceVersion
}

// Fresh is Get.
func (f *Files) Fresh(ctx context.Context, ref routes.Ref) (routes.Route, error) {
	return f.Get(ctx, ref)
}

// List returns the routes of a kind in a namespace whose labels match.
func (f *Files) List(_ context.Context, kind routes.Kind, namespace string, selector labels.Selector) ([]routes.Route, error) {
	var out []routes.Route
	for ref, r := range f.routes {
		if ref.Kind == kind && ref.Namespace == namespace && selector.Matches(labels.Set(r.Labels)) {
			out = append(out, f.withSchema(r.DeepCopy()))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// ServedVersion is the version the files give the kind (v1 when none has it).
func (f *Files) ServedVersion(_ context.Context, kind routes.Kind) (string, error) {
	for ref, r := range f.routes {
		if ref.Kind == kind {
			return r.Version, nil
		}
	}
	return "v1", nil
}

// Gateways answers from the GatewayClasses, Gateways and ListenerSets of
// the files: a parent they do not hold is one whose features are not known.
func (f *Files) Gateways(ctx context.Context, parents routes.Parents) []routes.Gateway {
	return f.parents.Gateways(ctx, parents)
}

// Written does nothing: a plan writes nothing.
func (f *Files) Written(*kube.Answer) {}

// NextEvent is nil: files do not change.
func (f *Files) NextEvent(routes.Ref) <-chan struct{} { return nil }

// Ports answers with the Services of the files (kube.Services).
func (f *Files) Ports(_ context.Context, namespace, name string) ([]corev1.ServicePort, error) {
	ports, ok := f.services[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("the files given with --routes hold no Service %s/%s", namespace, name)
	}
	return ports, nil
}

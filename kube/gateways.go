package kube

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	sigsjson "sigs.k8s.io/json"
)

// What a route's parents carry: each parent's GatewayClass and the features
// it publishes in status.supportedFeatures. GatewayClasses, Gateways and
// ListenerSets change rarely, so they are read through watch caches of their
// own, started on first use like the routes' (GatewayClasses cluster-wide,
// the others per namespace): a warm call sends no request for them.

// xGroup is the group of Gateway API's experimental kinds.
const xGroup = "gateway.networking.x-k8s.io"

// parentKinds are the kinds of the resources gateways.go reads.
var parentKinds = map[schema.GroupVersionResource]string{
	gatewayClasses: "GatewayClass", gateways: "Gateway", listenerSets: "ListenerSet", xListenerSets: "XListenerSet",
}

var (
	gatewayClasses = schema.GroupVersionResource{Group: routes.Group, Version: "v1", Resource: "gatewayclasses"}
	gateways       = schema.GroupVersionResource{Group: routes.Group, Version: "v1", Resource: "gateways"}
	listenerSets   = schema.GroupVersionResource{Group: routes.Group, Version: "v1", Resource: "listenersets"}
	xListenerSets  = schema.GroupVersionResource{Group: xGroup, Version: "v1alpha1", Resource: "xlistenersets"}
)

// parentObject is what the plugin keeps of a GatewayClass, a Gateway or a
// ListenerSet: the little that says which class carries a route.
type parentObject struct {
	metav1.TypeMeta
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		// GatewayClassName is a Gateway's class.
		GatewayClassName string `json:"gatewayClassName"`
		// ParentRef is the Gateway a ListenerSet belongs to.
		ParentRef *struct {
			Group     *string `json:"group"`
			Kind      *string `json:"kind"`
			Namespace *string `json:"namespace"`
			Name      string  `json:"name"`
		} `json:"parentRef"`
	} `json:"spec"`
	Status struct {
		// SupportedFeatures is a GatewayClass's.
		SupportedFeatures []featureName `json:"supportedFeatures"`
	} `json:"status"`
}

func (o *parentObject) DeepCopyObject() runtime.Object {
	out := *o
	out.ObjectMeta = *o.ObjectMeta.DeepCopy()
	out.Status.SupportedFeatures = append([]featureName(nil), o.Status.SupportedFeatures...)
	if o.Spec.ParentRef != nil {
		ref := *o.Spec.ParentRef
		out.Spec.ParentRef = &ref
	}
	return &out
}

// featureName is one entry of status.supportedFeatures: an object with a
// name since Gateway API v1.4, a string in the experimental channel before.
type featureName string

func (f *featureName) UnmarshalJSON(b []byte) error {
	var name string
	if err := json.Unmarshal(b, &name); err == nil {
		*f = featureName(name)
		return nil
	}
	var obj struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(b, &obj); err != nil {
		return fmt.Errorf("a supportedFeatures entry that is neither a name nor an object with one: %s", b)
	}
	*f = featureName(obj.Name)
	return nil
}

// Gateways says, for each of a route's parents, which GatewayClass carries
// it and what that class publishes. It never fails: a parent that cannot be
// read is one whose features are not known (Gateway.Unknown says why), and
// the call is written as it was before the plugin checked.
func (c *Cluster) Gateways(ctx context.Context, parents routes.Parents) []routes.Gateway {
	return gatewaysOf(ctx, parents, c.parentObject)
}

// getParent reads a GatewayClass, Gateway or ListenerSet.
type getParent func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*parentObject, error)

// gatewaysOf is Gateways with objects read by get.
func gatewaysOf(ctx context.Context, parents routes.Parents, get getParent) []routes.Gateway {
	out := make([]routes.Gateway, 0, len(parents.Refs))
	for _, p := range parents.Refs {
		g := routes.Gateway{Parent: p}
		gw, err := gatewayOf(ctx, p, get)
		if err == nil {
			g.Class = gw.Spec.GatewayClassName
			var class *parentObject
			if class, err = get(ctx, gatewayClasses, "", g.Class); err == nil {
				for _, f := range class.Status.SupportedFeatures {
					g.Features = append(g.Features, string(f))
				}
				g.Publishes = len(g.Features) > 0
			} else {
				err = fmt.Errorf("GatewayClass %s: %w", g.Class, err)
			}
		}
		if err != nil {
			g.Class = ""
			g.Unknown = err.Error()
		}
		out = append(out, g)
	}
	return out
}

// gatewayOf reads the Gateway a parent is, or belongs to.
func gatewayOf(ctx context.Context, p routes.ParentRef, get getParent) (*parentObject, error) {
	var lsets schema.GroupVersionResource
	switch {
	case p.Group == routes.Group && p.Kind == "Gateway":
		return get(ctx, gateways, p.Namespace, p.Name)
	case p.Group == routes.Group && p.Kind == "ListenerSet":
		lsets = listenerSets
	case p.Group == xGroup && p.Kind == "XListenerSet":
		lsets = xListenerSets
	case p.Group == "" && p.Kind == "Service":
		return nil, fmt.Errorf("a Service parent belongs to a mesh, which publishes no GatewayClass (an XMesh, which the plugin does not read); not checked")
	default:
		return nil, fmt.Errorf("a parent of kind %s.%s, which the plugin does not know", p.Kind, p.Group)
	}
	ls, err := get(ctx, lsets, p.Namespace, p.Name)
	if err != nil {
		return nil, err
	}
	ref := ls.Spec.ParentRef
	if ref == nil {
		return nil, fmt.Errorf("%s %s/%s names no parent Gateway", p.Kind, p.Namespace, p.Name)
	}
	ns := p.Namespace
	if ref.Namespace != nil {
		ns = *ref.Namespace
	}
	if (ref.Group != nil && *ref.Group != routes.Group) || (ref.Kind != nil && *ref.Kind != "Gateway") {
		return nil, fmt.Errorf("%s %s/%s belongs to a parent that is not a Gateway", p.Kind, p.Namespace, p.Name)
	}
	return get(ctx, gateways, ns, ref.Name)
}

// objectName is how errors name an object of a resource.
func objectName(gvr schema.GroupVersionResource, namespace, name string) string {
	kind := parentKinds[gvr]
	if namespace == "" {
		return kind + " " + name
	}
	return fmt.Sprintf("%s %s/%s", kind, namespace, name)
}

// parentObject reads one object from its watch cache, or with a GET while
// the cache has not synced (or has not seen an object created a moment
// ago). An error says what was read and, where RBAC refused it, what to
// grant.
func (c *Cluster) parentObject(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*parentObject, error) {
	what := objectName(gvr, namespace, name)
	// The names come from a route: checked before any watch or read.
	path, err := resourcePath(gvr, namespace, name)
	if err != nil || name == "" {
		return nil, fmt.Errorf("reading %s: %w", what, cmp.Or(err, errNoName))
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	if inf := c.parentCache(ctx, gvr, namespace); inf != nil {
		if obj, ok, err := inf.GetIndexer().GetByKey(key); err == nil && ok {
			return obj.(*parentObject), nil
		}
	}
	raw, err := body(c.client.Get().AbsPath(path...).Do(ctx))
	switch {
	case apierrors.IsForbidden(err):
		return nil, fmt.Errorf("reading %s was refused: grant the plugin's ServiceAccount get, list and watch on %s.%s (docs/install.md)", what, gvr.Resource, gvr.Group)
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	// Which object came back is read first: nothing of another is decoded,
	// so no error quotes it.
	var id metav1.PartialObjectMetadata
	if err := json.Unmarshal(raw, &id); err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	if err := answerIs(objectID{parentKinds[gvr], namespace, name}, objectID{id.Kind, id.Namespace, id.Name}); err != nil {
		return nil, err
	}
	var o parentObject
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &o); err != nil {
		return nil, fmt.Errorf("reading %s: %w", what, err)
	}
	return &o, nil
}

// parentCache starts, on first use, the watch cache of a parent resource in
// a namespace ("" for all of a cluster-scoped one); nil while it has not
// synced.
func (c *Cluster) parentCache(ctx context.Context, gvr schema.GroupVersionResource, namespace string) cache.SharedIndexInformer {
	return c.objectCache(ctx, gvr, namespace, &parentObject{}, readParent)
}

// readParent reads what a cache keeps of a parent: its managedFields are
// never read (Gateways carry long ones).
func readParent(data []byte) (runtime.Object, error) {
	var o parentObject
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &o); err != nil {
		return nil, err
	}
	o.ManagedFields = nil
	return &o, nil
}

type parentKey struct {
	gvr       schema.GroupVersionResource
	namespace string
}

// ParentIndex holds GatewayClasses, Gateways and ListenerSets given as
// files, for a plan against no cluster.
type ParentIndex struct {
	objects map[parentKey]map[string]*parentObject // by namespace/name
}

// Add keeps obj (a served or written object in JSON) if it is a
// GatewayClass, a Gateway or a ListenerSet, and says whether it was.
func (ix *ParentIndex) Add(obj []byte) (bool, error) {
	var o parentObject
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(obj, &o); err != nil {
		return false, err
	}
	gv, err := schema.ParseGroupVersion(o.APIVersion)
	if err != nil {
		return false, err
	}
	for gvr, kind := range parentKinds {
		if gv.Group != gvr.Group || o.Kind != kind {
			continue
		}
		ns := o.Namespace
		if gvr == gatewayClasses {
			ns = ""
		}
		if ix.objects == nil {
			ix.objects = map[parentKey]map[string]*parentObject{}
		}
		key := parentKey{gvr: gvr, namespace: ns}
		if ix.objects[key] == nil {
			ix.objects[key] = map[string]*parentObject{}
		}
		ix.objects[key][o.Name] = &o
		return true, nil
	}
	return false, nil
}

// Gateways is Cluster.Gateways over the objects added.
func (ix *ParentIndex) Gateways(ctx context.Context, parents routes.Parents) []routes.Gateway {
	return gatewaysOf(ctx, parents, func(_ context.Context, gvr schema.GroupVersionResource, namespace, name string) (*parentObject, error) {
		if o, ok := ix.objects[parentKey{gvr: gvr, namespace: namespace}][name]; ok {
			return o, nil
		}
		return nil, fmt.Errorf("the files given hold no %s", objectName(gvr, namespace, name))
	})
}

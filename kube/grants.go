package kube

import (
	"context"
	"fmt"
	"sort"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	sigsjson "sigs.k8s.io/json"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Reach says whether a Rollout of namespace rollouts may reach its targets:
// it reads the ReferenceGrants of every namespace of the targets other than
// the Rollout's, and nothing else there, and answers with the targets they
// do not grant (routes.Reach), or the error of a read.
func Reach(ctx context.Context, r GrantReader, rollouts string, t routes.Targets) ([]*routes.NotGrantedError, error) {
	grants := map[string][]routes.ReferenceGrant{}
	for _, ns := range routes.ForeignNamespaces(rollouts, t) {
		g, err := r.ReferenceGrants(ctx, ns)
		if err != nil {
			return nil, err
		}
		grants[ns] = g
	}
	return routes.Reach(rollouts, t, grants), nil
}

// Reachable is where a Rollout may reach routes from: the namespace of its
// Rollouts, and, with Any (-require-reference-grants=false), every other.
type Reachable struct {
	From string
	Any  bool
}

// ResolveInReach reads the routes of the targets when all of them are
// within reach (Reach), as ResolveEach does; when one is not, it reads no
// route, and answers with the targets refused.
func ResolveInReach(ctx context.Context, r interface {
	GrantReader
	RouteReader
}, reach Reachable, t routes.Targets) (Resolution, []*routes.NotGrantedError, error) {
	if !reach.Any {
		refused, err := Reach(ctx, r, reach.From, t)
		if err != nil || len(refused) > 0 {
			return Resolution{}, refused, err
		}
	}
	return ResolveEach(ctx, r, t), nil, nil
}

// grantObject is what the plugin keeps of a ReferenceGrant.
type grantObject struct {
	metav1.TypeMeta
	metav1.ObjectMeta `json:"metadata"`
	Spec              routes.ReferenceGrant `json:"spec"`
}

func (g *grantObject) DeepCopyObject() runtime.Object {
	out := *g
	out.ObjectMeta = *g.ObjectMeta.DeepCopy()
	out.Spec.From = append([]routes.GrantFrom(nil), g.Spec.From...)
	out.Spec.To = make([]routes.GrantTarget, len(g.Spec.To))
	for i, t := range g.Spec.To {
		if t.Name != nil {
			name := *t.Name
			t.Name = &name
		}
		out.Spec.To[i] = t
	}
	return &out
}

// readGrant reads what a cache keeps of a ReferenceGrant.
func readGrant(data []byte) (runtime.Object, error) {
	var g grantObject
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &g); err != nil {
		return nil, err
	}
	g.ManagedFields = nil
	return &g, nil
}

// grantVersions are the versions of ReferenceGrant the plugin reads,
// preferred first: v1 from Gateway API 1.5, v1beta1 before and beside it.
var grantVersions = []string{"v1", "v1beta1"}

// ReferenceGrants are the ReferenceGrants of a namespace, from its watch
// cache (started on first use; a LIST while it has not synced), sorted by
// name. A cluster that serves no ReferenceGrant has none.
func (c *Cluster) ReferenceGrants(ctx context.Context, namespace string) ([]routes.ReferenceGrant, error) {
	version, err := c.grantVersion(ctx)
	if err != nil || version == "" {
		return nil, err
	}
	gvr := schema.GroupVersionResource{Group: routes.Group, Version: version, Resource: "referencegrants"}
	var objs []runtime.Object
	if inf := c.objectCache(ctx, gvr, namespace, &grantObject{}, readGrant); inf != nil {
		for _, o := range inf.GetIndexer().List() {
			objs = append(objs, o.(runtime.Object))
		}
	} else {
		l, err := listObjects(ctx, c, gvr, namespace, metav1.ListOptions{}, readGrant)
		if apierrors.IsNotFound(err) && kubeclient.NotServed(err) {
			c.mu.Lock()
			c.grantsServed = "" // the CRD changed: discover again next time
			c.mu.Unlock()
		}
		if err != nil {
			return nil, fmt.Errorf("reading the ReferenceGrants of namespace %s: %w", namespace,
				kubeclient.AsPermissionError(err, "list", "referencegrants."+routes.Group, namespace))
		}
		objs = l.Items
	}
	out := make([]routes.ReferenceGrant, 0, len(objs))
	for _, o := range objs {
		g := o.(*grantObject)
		rg := g.Spec
		rg.Namespace, rg.Name = g.Namespace, g.Name
		out = append(out, rg)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// grantVersion is the version of ReferenceGrant the cluster serves, "" when
// it serves none; asked until it serves one, then remembered.
func (c *Cluster) grantVersion(ctx context.Context) (string, error) {
	c.mu.Lock()
	v := c.grantsServed
	c.mu.Unlock()
	if v != "" {
		return v, nil
	}
	for _, version := range grantVersions {
		served, err := c.serves(ctx, version, "referencegrants")
		if err != nil {
			return "", fmt.Errorf("discovering the served versions of ReferenceGrant: %w", err)
		}
		if served {
			c.mu.Lock()
			c.grantsServed = version
			c.mu.Unlock()
			return version, nil
		}
	}
	return "", nil
}

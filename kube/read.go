package kube

import (
	"context"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The read path: a route or a list of routes, from the watch cache when it
// has synced, else with a GET or a LIST.

// Get reads a route, from the watch cache when it has synced.
func (c *Cluster) Get(ctx context.Context, ref routes.Ref) (routes.Route, error) {
	r, err := c.get(ctx, ref)
	return c.withSchema(ctx, r, err)
}

func (c *Cluster) get(ctx context.Context, ref routes.Ref) (routes.Route, error) {
	c.use(ref)
	store, obj, err := c.cached(ctx, ref)
	if err != nil {
		return routes.Route{}, err
	}
	if obj == nil {
		// Not cached, or a route created a moment ago that has not
		// reached the cache yet; or one found missing a moment ago.
		return c.freshUnlessMissing(ctx, ref)
	}
	r, slim, err := c.fromCache(store, obj)
	if !slim {
		return r, err
	}
	// The cache keeps only the identity of a route no call had used: read
	// it whole, once.
	if r, err = c.fresh(ctx, ref); err == nil {
		c.keepWhole(r)
	}
	return r, err
}

// cached is the watch cache of the route's kind and namespace and its entry
// of the route; obj is nil when the cache cannot be read yet (not synced,
// its watch broken) or holds nothing of the route.
func (c *Cluster) cached(ctx context.Context, ref routes.Ref) (store cache.Store, obj any, err error) {
	inf, err := c.cacheFor(ctx, ref.Kind, ref.Namespace)
	if err != nil || inf == nil {
		return nil, nil, err
	}
	obj, exists, err := inf.GetIndexer().GetByKey(ref.Namespace + "/" + ref.Name)
	if err != nil || !exists {
		return nil, nil, nil
	}
	return inf.GetIndexer(), obj, nil
}

// ResourceVersion is the newest resourceVersion of the route that the
// watch cache or a write's answer holds, "" when the cache cannot be read
// (not synced, its watch broken) or holds nothing of the route.
func (c *Cluster) ResourceVersion(ctx context.Context, ref routes.Ref) string {
	_, obj, err := c.cached(ctx, ref)
	if err != nil || obj == nil {
		return ""
	}
	rv := obj.(*cachedRoute).resourceVersion
	c.mu.Lock()
	defer c.mu.Unlock()
	if a, ok := c.overlay[ref]; ok && routes.NewerVersion(a.ResourceVersion, rv) {
		rv = a.ResourceVersion
	}
	return rv
}

// use records that a call reads the route: its watch cache keeps it whole
// from its next event on.
func (c *Cluster) use(ref routes.Ref) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, forgot := range c.readByCalls.put(ref, struct{}{}) {
		// Kept slim from its next event on: nothing would drop its whole
		// copy read fresh.
		delete(c.freshWhole, forgot)
	}
}

// keeps says whether a watch cache keeps the route whole.
func (c *Cluster) keeps(ref routes.Ref) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.readByCalls.get(ref)
	return ok
}

// fromCache is the caller's own copy of what a watch cache holds (obj, read
// from store), or of what the plugin wrote or read fresh after it; slim
// when the cache holds only what a selector reads and nothing newer is
// known: the caller reads the route fresh.
//
// The watch can bring in the plugin's write between reading obj and looking
// at the overlay: the informer stores the event, then caughtUp drops the
// answer, and the overlay no longer has anything newer than obj. So store is
// read again after the overlay: it holds the write then, since the informer
// stores an event before it tells caughtUp.
func (c *Cluster) fromCache(store cache.Store, obj any) (r routes.Route, slim bool, err error) {
	cr := obj.(*cachedRoute)
	if cr.err != nil {
		return routes.Route{}, false, cr.err
	}
	r, slim = c.newest(cr.whole(), cr.slim(), true)
	if now, ok, err := store.Get(obj); err == nil && ok {
		if n := now.(*cachedRoute); routes.NewerVersion(n.resourceVersion, r.ResourceVersion) {
			if n.err != nil {
				return routes.Route{}, false, n.err
			}
			if n.slim() {
				r, slim = c.newest(n.whole(), true, true)
				return r, slim, nil
			}
			return n.route.DeepCopy(), false, nil
		}
	}
	return r, slim, nil
}

// Fresh reads a route with a GET. An answer that the apiserver does not serve
// the kind in the version the reader knows makes it discover the version
// again and read once more.
func (c *Cluster) Fresh(ctx context.Context, ref routes.Ref) (routes.Route, error) {
	r, err := c.fresh(ctx, ref)
	return c.withSchema(ctx, r, err)
}

func (c *Cluster) fresh(ctx context.Context, ref routes.Ref) (routes.Route, error) {
	for again := true; ; again = false {
		version, err := c.ServedVersion(ctx, ref.Kind)
		if err != nil {
			return routes.Route{}, err
		}
		gvr := ref.Kind.GVR(version)
		path, err := objectPath("/apis", gvr.Group, gvr.Version, "namespaces", ref.Namespace, gvr.Resource, ref.Name)
		if err != nil {
			return routes.Route{}, err
		}
		raw, err := body(c.client.Get().AbsPath(path...).Do(ctx))
		if kubeclient.NotServed(err) && again {
			c.forget(ref.Kind, version)
			continue
		}
		if err != nil {
			return routes.Route{}, err
		}
		r, err := decodeRoute(raw)
		if err == nil && r.Ref != ref {
			return routes.Route{}, wrongAnswer(ref, r.Ref)
		}
		if err == nil {
			// A cache still behind this read must not answer the next read
			// with an older route: a write whose answer was lost and whose
			// repeat was refused is known only from this read.
			c.remember(Answered(r.DeepCopy(), nil))
		}
		return r, err
	}
}

// List returns the routes of a kind in a namespace that match selector,
// sorted by name.
func (c *Cluster) List(ctx context.Context, kind routes.Kind, namespace string, selector labels.Selector) ([]routes.Route, error) {
	inf, err := c.cacheFor(ctx, kind, namespace)
	if err != nil {
		return nil, err
	}
	var out []routes.Route
	slim := false
	if inf != nil {
		if out, slim, err = c.listCached(inf, selector); err != nil {
			return nil, err
		}
	}
	if inf == nil || slim {
		// No cache, or one that keeps only the identity of routes no call
		// had used: one LIST reads the selected routes whole.
		if out, err = c.listWhole(ctx, kind, namespace, selector, inf != nil); err != nil {
			return nil, err
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	schemas := map[string]routes.Schema{} // by version: one lookup per List, not per route
	for i := range out {
		s, ok := schemas[out[i].Version]
		if !ok {
			s = c.schemaOf(ctx, kind, out[i].Version)
			schemas[out[i].Version] = s
		}
		out[i].Schema = s
	}
	return out, nil
}

// listCached is what the watch cache holds of the selected routes; slim
// says that some of them it holds only by identity and labels.
func (c *Cluster) listCached(inf cache.SharedIndexInformer, selector labels.Selector) (out []routes.Route, slim bool, err error) {
	for _, o := range inf.GetIndexer().List() {
		if !selector.Matches(labelsOf(o)) {
			continue
		}
		c.use(o.(*cachedRoute).ref)
		r, isSlim, err := c.fromCache(inf.GetIndexer(), o)
		if err != nil {
			return nil, false, err
		}
		slim = slim || isSlim
		out = append(out, r)
	}
	return out, slim, nil
}

// listWhole reads the selected routes with one LIST, whole; cached says
// the kind's watch cache runs, which keeps them whole from now on.
func (c *Cluster) listWhole(ctx context.Context, kind routes.Kind, namespace string, selector labels.Selector, cached bool) ([]routes.Route, error) {
	list, err := c.list(ctx, kind, namespace, selector)
	if err != nil {
		return nil, err
	}
	out := make([]routes.Route, 0, len(list.Items))
	for i := range list.Items {
		if err := list.Items[i].err; err != nil {
			return nil, err
		}
		r := list.Items[i].whole()
		c.use(r.Ref)
		if cached {
			c.keepWhole(r)
		}
		r, _ = c.newest(r, false, false)
		out = append(out, r)
	}
	return out, nil
}

// labelsOf are the labels of what a watch cache holds.
func labelsOf(obj any) labels.Labels {
	cr := obj.(*cachedRoute)
	if cr.route != nil {
		return labels.Set(cr.route.Labels)
	}
	return cr.labels
}

// list LISTs the routes, discovering the version again if the apiserver no
// longer serves the one the reader knows.
func (c *Cluster) list(ctx context.Context, kind routes.Kind, namespace string, selector labels.Selector) (*routeList, error) {
	for again := true; ; again = false {
		version, err := c.ServedVersion(ctx, kind)
		if err != nil {
			return nil, err
		}
		list, err := listRoutes(ctx, c.client, kind.GVR(version), namespace, metav1.ListOptions{LabelSelector: selector.String()}, nil)
		if kubeclient.NotServed(err) && again {
			c.forget(kind, version)
			continue
		}
		return list, err
	}
}

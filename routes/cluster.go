package routes

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

// Reader reads routes. Get and List may answer from a watch cache; Fresh
// always asks the apiserver (the answer to a stale cache).
//
// Every Route a Reader returns belongs to the caller: it shares no map, slice
// or rule with what the reader keeps or hands to anyone else, so concurrent
// calls may change what they got without copying first.
type Reader interface {
	Get(ctx context.Context, ref Ref) (Route, error)
	Fresh(ctx context.Context, ref Ref) (Route, error)
	List(ctx context.Context, kind Kind, namespace string, selector labels.Selector) ([]Route, error)
	// ServedVersion is the API version the plugin reads and writes kind in.
	ServedVersion(ctx context.Context, kind Kind) (string, error)
	// Written tells the reader about an object the plugin just wrote, so the
	// next Get does not answer with an older cached copy. The reader keeps a
	// copy of r.
	Written(r Route)
}

// cacheSyncTimeout bounds how long a first read waits for a watch cache; past
// it (typically RBAC without list/watch) the plugin reads with plain GETs.
const cacheSyncTimeout = 15 * time.Second

// Cluster reads routes from one cluster through watch caches started lazily,
// one per namespace and kind.
type Cluster struct {
	dyn  dynamic.Interface
	disc discovery.DiscoveryInterface
	log  *logrus.Entry

	mu        sync.Mutex
	versions  map[Kind]string
	informers map[informerKey]*namespaceCache
	written   map[Ref]Route
}

type informerKey struct {
	kind      Kind
	namespace string
}

type namespaceCache struct {
	ready    chan struct{}
	informer cache.SharedIndexInformer // nil when the cache could not sync
}

// NewCluster returns a Reader for the cluster behind the clients.
func NewCluster(dyn dynamic.Interface, disc discovery.DiscoveryInterface, log *logrus.Entry) *Cluster {
	return &Cluster{
		dyn: dyn, disc: disc, log: log,
		versions:  map[Kind]string{},
		informers: map[informerKey]*namespaceCache{},
		written:   map[Ref]Route{},
	}
}

// ServedVersion asks discovery once per kind which supported version the
// cluster serves, preferring v1.
func (c *Cluster) ServedVersion(ctx context.Context, kind Kind) (string, error) {
	c.mu.Lock()
	v, ok := c.versions[kind]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	for _, version := range kind.Versions() {
		list, err := c.disc.ServerResourcesForGroupVersion(Group + "/" + version)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("discovering the served versions of %s: %w", kind, err)
		}
		for _, res := range list.APIResources {
			if res.Name == kind.Resource() {
				c.mu.Lock()
				c.versions[kind] = version
				c.mu.Unlock()
				return version, nil
			}
		}
	}
	return "", fmt.Errorf("the cluster serves %s in none of the versions this plugin supports (%v): "+
		"install the Gateway API CRDs that define it", kind, kind.Versions())
}

// Get reads a route, from the watch cache when it has synced.
func (c *Cluster) Get(ctx context.Context, ref Ref) (Route, error) {
	inf, err := c.cacheFor(ctx, ref.Kind, ref.Namespace)
	if err != nil {
		return Route{}, err
	}
	if inf == nil {
		return c.Fresh(ctx, ref)
	}
	obj, exists, err := inf.GetIndexer().GetByKey(ref.Namespace + "/" + ref.Name)
	if err != nil || !exists {
		// A route created a moment ago may not have reached the cache yet.
		return c.Fresh(ctx, ref)
	}
	r, err := FromUnstructured(obj.(*unstructured.Unstructured))
	if err != nil {
		return Route{}, err
	}
	return c.newest(r), nil
}

// Fresh reads a route with a GET.
func (c *Cluster) Fresh(ctx context.Context, ref Ref) (Route, error) {
	version, err := c.ServedVersion(ctx, ref.Kind)
	if err != nil {
		return Route{}, err
	}
	u, err := c.dyn.Resource(ref.Kind.GVR(version)).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return Route{}, err
	}
	return FromUnstructured(u)
}

// List returns the routes of a kind in a namespace that match selector,
// sorted by name.
func (c *Cluster) List(ctx context.Context, kind Kind, namespace string, selector labels.Selector) ([]Route, error) {
	inf, err := c.cacheFor(ctx, kind, namespace)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	if inf != nil {
		for _, o := range inf.GetIndexer().List() {
			u := o.(*unstructured.Unstructured)
			if selector.Matches(labels.Set(u.GetLabels())) {
				objs = append(objs, u)
			}
		}
	} else {
		version, err := c.ServedVersion(ctx, kind)
		if err != nil {
			return nil, err
		}
		list, err := c.dyn.Resource(kind.GVR(version)).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			objs = append(objs, &list.Items[i])
		}
	}
	out := make([]Route, 0, len(objs))
	for _, u := range objs {
		r, err := FromUnstructured(u)
		if err != nil {
			return nil, err
		}
		out = append(out, c.newest(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Written records the route the apiserver returned for the plugin's write.
func (c *Cluster) Written(r Route) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[r.Ref] = r.DeepCopy()
}

// newest answers with what the plugin wrote itself when the cache has not
// caught up with it yet, so an unchanged route is not written twice.
func (c *Cluster) newest(cached Route) Route {
	c.mu.Lock()
	defer c.mu.Unlock()
	w, ok := c.written[cached.Ref]
	if !ok {
		return cached
	}
	if newer(w.ResourceVersion, cached.ResourceVersion) {
		return w.DeepCopy()
	}
	delete(c.written, cached.Ref)
	return cached
}

// newer compares resourceVersions the way client-go's mutation cache does:
// as integers where both parse, otherwise the cache wins.
func newer(a, b string) bool {
	ai, errA := strconv.ParseUint(a, 10, 64)
	bi, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && ai > bi
}

// cacheFor starts, on first use, the watch cache of a kind in a namespace and
// waits for it to sync. It returns nil when the cache cannot sync in time.
func (c *Cluster) cacheFor(ctx context.Context, kind Kind, namespace string) (cache.SharedIndexInformer, error) {
	version, err := c.ServedVersion(ctx, kind)
	if err != nil {
		return nil, err
	}
	key := informerKey{kind: kind, namespace: namespace}
	c.mu.Lock()
	nc, ok := c.informers[key]
	if !ok {
		nc = &namespaceCache{ready: make(chan struct{})}
		c.informers[key] = nc
		go c.start(nc, kind.GVR(version), namespace)
	}
	c.mu.Unlock()
	select {
	case <-nc.ready:
		return nc.informer, nil
	case <-ctx.Done():
		return nil, nil
	}
}

func (c *Cluster) start(nc *namespaceCache, gvr schema.GroupVersionResource, namespace string) {
	defer close(nc.ready)
	inf := dynamicinformer.NewFilteredDynamicInformer(c.dyn, gvr, namespace, 0, cache.Indexers{}, nil).Informer()
	stop := make(chan struct{})
	go inf.Run(stop)
	ctx, cancel := context.WithTimeout(context.Background(), cacheSyncTimeout)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		close(stop)
		c.log.WithFields(logrus.Fields{"resource": gvr.Resource, "namespace": namespace}).
			Warn("watch cache did not sync (does the plugin's ServiceAccount may list and watch routes?); reading with GET")
		return
	}
	nc.informer = inf
}

package routes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
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

// cacheSyncWait bounds how long the calls of the first moments of a watch
// cache wait for it to sync before reading with GETs; a cache whose list was
// refused or failed is not waited for at all. Either way the cache keeps
// trying in the background (the informer retries with backoff) and calls use
// it from the moment it has synced.
const cacheSyncWait = 5 * time.Second

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
	closed    bool
}

type informerKey struct {
	kind      Kind
	namespace string
}

// namespaceCache is the watch cache of one kind in one namespace.
type namespaceCache struct {
	informer cache.SharedIndexInformer
	started  time.Time
	stop     chan struct{}
	// synced is closed when the cache has synced; failed when its list or
	// watch failed before that (the informer keeps retrying).
	synced, failed chan struct{}
	failOnce       sync.Once
	errors         atomic.Int32
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

// Close stops every watch cache; the Cluster reads with GETs afterwards.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for key, nc := range c.informers {
		close(nc.stop)
		delete(c.informers, key)
	}
}

// ServedVersion asks discovery once per kind which supported version the
// cluster serves, preferring v1. A failed discovery is not remembered, and a
// version the apiserver stops serving is forgotten (forget), so the next call
// asks again: a CRD upgrade needs no restart.
func (c *Cluster) ServedVersion(ctx context.Context, kind Kind) (string, error) {
	c.mu.Lock()
	v, ok := c.versions[kind]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	for _, version := range kind.Versions() {
		served, err := c.serves(ctx, version, kind)
		if err != nil {
			return "", fmt.Errorf("discovering the served versions of %s: %w", kind, err)
		}
		if served {
			c.mu.Lock()
			c.versions[kind] = version
			c.mu.Unlock()
			return version, nil
		}
	}
	return "", fmt.Errorf("the cluster serves %s in none of the versions this plugin supports (%v): "+
		"install the Gateway API CRDs that define it", kind, kind.Versions())
}

// serves asks the apiserver whether it serves kind in version, under ctx
// (the discovery client's own methods take no context).
func (c *Cluster) serves(ctx context.Context, version string, kind Kind) (bool, error) {
	raw, err := c.disc.RESTClient().Get().AbsPath("/apis", Group, version).Do(ctx).Raw()
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, fmt.Errorf("decoding the resources of %s/%s: %w", Group, version, err)
	}
	for _, res := range list.APIResources {
		if res.Name == kind.Resource() {
			return true, nil
		}
	}
	return false, nil
}

// forget drops what the reader knows about kind in version after the
// apiserver answered that it does not serve it: the version and the watch
// caches of the kind. It says whether there was anything to forget.
func (c *Cluster) forget(kind Kind, version string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.versions[kind] != version {
		return false
	}
	delete(c.versions, kind)
	for key, nc := range c.informers {
		if key.kind == kind {
			close(nc.stop)
			delete(c.informers, key)
		}
	}
	c.log.WithFields(logrus.Fields{"kind": string(kind), "version": version}).Warn("the apiserver no longer serves this version; discovering the served version again")
	return true
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
	return c.fromCache(obj)
}

// fromCache is the caller's own copy of what a watch cache holds, or of what
// the plugin wrote after it.
func (c *Cluster) fromCache(obj any) (Route, error) {
	if cr, ok := obj.(*cachedRoute); ok {
		return c.newest(cr.route, true), nil
	}
	// The transform could not read it; FromUnstructured says why.
	r, err := FromUnstructured(obj.(*unstructured.Unstructured))
	if err != nil {
		return Route{}, err
	}
	return c.newest(r, false), nil
}

// cachedRoute is what a watch cache keeps of a route: the Route the plugin
// reads, made once when the event arrives (keepWhatThePluginReads), so a call
// copies it instead of reading the whole served object again. Its ObjectMeta
// holds only what the informer keys and orders it by.
type cachedRoute struct {
	metav1.ObjectMeta
	route Route
}

func (c *cachedRoute) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (c *cachedRoute) DeepCopyObject() runtime.Object {
	return &cachedRoute{ObjectMeta: *c.ObjectMeta.DeepCopy(), route: c.route.DeepCopy()}
}

// keepWhatThePluginReads is the watch caches' transform: of a served route
// it keeps what a call reads (identity, resourceVersion, generation, labels,
// annotations, managedFields, spec.rules, spec.parentRefs and status.parents,
// as a Route) and drops the rest (uid, timestamps, hostnames, every other
// field), before the object enters the cache. A route it cannot read stays
// as served, and reading it says why. It is idempotent, as client-go asks.
func keepWhatThePluginReads(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	r, err := FromUnstructuredNoCopy(u)
	if err != nil {
		return obj, nil
	}
	return &cachedRoute{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace, ResourceVersion: r.ResourceVersion}, route: r}, nil
}

// Fresh reads a route with a GET. An answer that the apiserver does not serve
// the kind in the version the reader knows makes it discover the version
// again and read once more.
func (c *Cluster) Fresh(ctx context.Context, ref Ref) (Route, error) {
	for again := true; ; again = false {
		version, err := c.ServedVersion(ctx, ref.Kind)
		if err != nil {
			return Route{}, err
		}
		u, err := c.dyn.Resource(ref.Kind.GVR(version)).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if NotServed(err) && again {
			c.forget(ref.Kind, version)
			continue
		}
		if err != nil {
			return Route{}, err
		}
		return FromUnstructuredNoCopy(u)
	}
}

// List returns the routes of a kind in a namespace that match selector,
// sorted by name.
func (c *Cluster) List(ctx context.Context, kind Kind, namespace string, selector labels.Selector) ([]Route, error) {
	inf, err := c.cacheFor(ctx, kind, namespace)
	if err != nil {
		return nil, err
	}
	var out []Route
	if inf != nil {
		for _, o := range inf.GetIndexer().List() {
			if !selector.Matches(labels.Set(labelsOf(o))) {
				continue
			}
			r, err := c.fromCache(o)
			if err != nil {
				return nil, err
			}
			out = append(out, r)
		}
	} else {
		list, err := c.list(ctx, kind, namespace, selector)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			r, err := FromUnstructuredNoCopy(&list.Items[i])
			if err != nil {
				return nil, err
			}
			out = append(out, c.newest(r, false))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// labelsOf are the labels of what a watch cache holds.
func labelsOf(obj any) map[string]string {
	if cr, ok := obj.(*cachedRoute); ok {
		return cr.route.Labels
	}
	return obj.(*unstructured.Unstructured).GetLabels()
}

// list LISTs the routes, discovering the version again if the apiserver no
// longer serves the one the reader knows.
func (c *Cluster) list(ctx context.Context, kind Kind, namespace string, selector labels.Selector) (*unstructured.UnstructuredList, error) {
	for again := true; ; again = false {
		version, err := c.ServedVersion(ctx, kind)
		if err != nil {
			return nil, err
		}
		list, err := c.dyn.Resource(kind.GVR(version)).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if NotServed(err) && again {
			c.forget(kind, version)
			continue
		}
		return list, err
	}
}

// Written records the route the apiserver returned for the plugin's write.
func (c *Cluster) Written(r Route) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written[r.Ref] = r.DeepCopy()
}

// newest answers with what the plugin wrote itself when the cache has not
// caught up with it yet, so an unchanged route is not written twice. A shared
// route (what the cache holds) is copied; one that is not is the caller's.
func (c *Cluster) newest(r Route, shared bool) Route {
	c.mu.Lock()
	w, ok := c.written[r.Ref]
	switch {
	case !ok:
	case newer(w.ResourceVersion, r.ResourceVersion):
		c.mu.Unlock()
		return w.DeepCopy() // the overlay's copy is never changed, only replaced
	default:
		delete(c.written, r.Ref)
	}
	c.mu.Unlock()
	if shared {
		return r.DeepCopy()
	}
	return r
}

// caughtUp forgets what the plugin wrote to a route once its watch cache
// holds that write or a newer one, so the overlay holds a route only for the
// moments between a write and its watch event, not a second copy of every
// route the plugin has written.
func (c *Cluster) caughtUp(obj any) {
	cr, ok := obj.(*cachedRoute)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.written[cr.route.Ref]; ok && !newer(w.ResourceVersion, cr.route.ResourceVersion) {
		delete(c.written, cr.route.Ref)
	}
}

// newer compares resourceVersions the way client-go's mutation cache does:
// as integers where both parse, otherwise the cache wins.
func newer(a, b string) bool {
	ai, errA := strconv.ParseUint(a, 10, 64)
	bi, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && ai > bi
}

// cacheFor starts, on first use, the watch cache of a kind in a namespace.
// It returns the cache once it has synced; nil (read with GET) while it has
// not: the first calls wait for it up to cacheSyncWait, unless its list has
// failed already.
func (c *Cluster) cacheFor(ctx context.Context, kind Kind, namespace string) (cache.SharedIndexInformer, error) {
	version, err := c.ServedVersion(ctx, kind)
	if err != nil {
		return nil, err
	}
	key := informerKey{kind: kind, namespace: namespace}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, nil
	}
	nc, ok := c.informers[key]
	if !ok {
		nc = c.start(kind.GVR(version), namespace)
		c.informers[key] = nc
	}
	c.mu.Unlock()
	if nc.informer.HasSynced() {
		return nc.informer, nil
	}
	wait := time.Until(nc.started.Add(cacheSyncWait))
	if wait <= 0 {
		return nil, nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-nc.synced:
		return nc.informer, nil
	case <-nc.failed:
	case <-timer.C:
	case <-ctx.Done():
	}
	return nil, nil
}

// start runs the watch cache of a resource in a namespace until its stop
// channel is closed. The informer retries a failed list or watch with backoff
// for as long as it runs, so a cache refused for want of RBAC heals when the
// permission is granted, without a restart.
func (c *Cluster) start(gvr schema.GroupVersionResource, namespace string) *namespaceCache {
	// As dynamicinformer builds it, without its informer factory, which
	// would bring an informer of every built-in API into the binary.
	res := c.dyn.Resource(gvr).Namespace(namespace)
	inf := cache.NewSharedIndexInformerWithOptions(cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return res.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return res.Watch(ctx, o) },
	}, c.dyn), &unstructured.Unstructured{}, cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}, ObjectDescription: gvr.String()})
	_ = inf.SetTransform(keepWhatThePluginReads) // fails only once the informer runs
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.caughtUp(obj) },
		UpdateFunc: func(_, obj any) { c.caughtUp(obj) },
	})
	nc := &namespaceCache{informer: inf, started: time.Now(), stop: make(chan struct{}),
		synced: make(chan struct{}), failed: make(chan struct{})}
	log := c.log.WithFields(logrus.Fields{"resource": gvr.Resource, "version": gvr.Version, "namespace": namespace})
	_ = inf.SetWatchErrorHandler(func(_ *cache.Reflector, err error) {
		n := nc.errors.Add(1)
		if !inf.HasSynced() {
			nc.failOnce.Do(func() { close(nc.failed) })
		}
		entry := log.WithError(err).WithField("failures", n)
		switch {
		case apierrors.IsResourceExpired(err) || apierrors.IsGone(err) || errors.Is(err, io.EOF):
			entry.Debug("watch cache restarts its watch")
		case apierrors.IsForbidden(err) && (n == 1 || n%20 == 0):
			entry.Warnf("watch cache refused: grant the plugin's ServiceAccount list and watch on %s.%s in namespace %s; until then the plugin reads routes with GETs",
				gvr.Resource, gvr.Group, namespace)
		case n == 1 || n%20 == 0:
			entry.Warn("watch cache failed; it retries with backoff, and the plugin reads routes with GETs until it has synced")
		default:
			entry.Debug("watch cache failed again")
		}
	})
	go inf.Run(nc.stop)
	go func() {
		if cache.WaitForCacheSync(nc.stop, inf.HasSynced) {
			close(nc.synced)
			if n := nc.errors.Load(); n > 0 {
				log.WithField("failures", n).Info("watch cache synced after failing; reads come from it again")
			}
		}
	}()
	return nc
}

package kube

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
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/gatewayapi-ssa/rollouts-plugin/apierr"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Reader reads routes. Get and List may answer from a watch cache; Fresh
// always asks the apiserver (the answer to a stale cache).
//
// Every Route a Reader returns belongs to the caller: it shares no map, slice
// or rule with what the reader keeps or hands to anyone else, so concurrent
// calls may change what they got without copying first.
type Reader interface {
	Get(ctx context.Context, ref routes.Ref) (routes.Route, error)
	Fresh(ctx context.Context, ref routes.Ref) (routes.Route, error)
	// ResourceVersion is the newest resourceVersion of the route the reader
	// holds (what Get would answer with), "" if it holds none or cannot
	// tell without a request; it copies nothing.
	ResourceVersion(ctx context.Context, ref routes.Ref) string
	// Changed is closed at the route's next watch event, once Get can
	// answer with it; nil when no watch of the route runs to tell.
	Changed(ref routes.Ref) <-chan struct{}
	List(ctx context.Context, kind routes.Kind, namespace string, selector labels.Selector) ([]routes.Route, error)
	// ServedVersion is the API version the plugin reads and writes kind in.
	ServedVersion(ctx context.Context, kind routes.Kind) (string, error)
	// Written tells the reader about an object the plugin just wrote, so the
	// next Get does not answer with an older cached copy. The reader keeps
	// the answer, and reads it only if a call reads the route before the
	// watch cache has the write. Fresh keeps what it read the same way.
	Written(a *routes.Answer)
	// Gateways says which GatewayClass carries each of a route's parents
	// and what it publishes; a parent that cannot be read is one whose
	// features are not known (routes.Gateway.Unknown).
	Gateways(ctx context.Context, parents routes.Parents) []routes.Gateway
	// ServiceImported says whether the cluster has a ServiceImport (ref is
	// one of routes.serviceImportGroups).
	ServiceImported(ctx context.Context, ref routes.ObjectRef) (bool, error)
	// ReferenceGrants are the ReferenceGrants of a namespace.
	ReferenceGrants(ctx context.Context, namespace string) ([]routes.ReferenceGrant, error)
	// PredecessorRecords are the header rules the argoproj-labs plugin
	// recorded in ConfigMap name of namespace.
	PredecessorRecords(ctx context.Context, namespace, name string) (routes.PredecessorRecords, error)
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
	client rest.Interface
	log    *logrus.Entry

	mu       sync.Mutex
	versions map[routes.Kind]string
	// importVersions are the preferred versions of the ServiceImport
	// groups asked about (imports.go).
	importVersions map[string]string
	// predecessors are the reads of the argoproj-labs plugin's ConfigMaps
	// (predecessor.go), by namespace/name.
	predecessors map[string]predecessorRead
	// grantsServed is the version of ReferenceGrant the cluster serves
	// (grants.go), "" until it is known.
	grantsServed string
	discoveries  kubeclient.Flights[routes.Kind, string]
	informers    map[informerKey]*namespaceCache
	// parents are the watch caches of GatewayClasses, Gateways,
	// ListenerSets (gateways.go) and ReferenceGrants (grants.go).
	parents map[parentKey]*namespaceCache
	// overlay holds, per route, the newest version the plugin has
	// seen beyond its watch cache (the answer to its write, or a fresh
	// read), until the cache holds it too.
	overlay map[routes.Ref]*routes.Answer
	// readByCalls are the routes a call has read: their watch caches keep them
	// whole; of every other route only what a selector reads (slim). whole
	// holds the routes read fresh while their cache entry is still slim,
	// until an event of theirs brings them whole.
	readByCalls map[routes.Ref]bool
	freshWhole  map[routes.Ref]routes.Route
	labelSets   labelSets
	closed      bool
	// stopIdle ends the goroutine that stops idle caches (idle.go); nil
	// while none runs.
	stopIdle chan struct{}
	// changes are closed at the next watch event of their route (Changed).
	changes map[routes.Ref]chan struct{}

	// schemaMu serializes reading the OpenAPI documents; schemas holds what
	// they said, per version.
	schemaMu sync.Mutex
	schemas  map[string]schemaDoc
}

// schemaDoc is what one version's OpenAPI document said of the route kinds.
type schemaDoc struct {
	kinds map[routes.Kind]routes.Schema
	read  time.Time
	// failed: the document could not be read; every kind is assumed to have
	// every field until it is read again.
	failed bool
}

type informerKey struct {
	kind      routes.Kind
	namespace string
}

// namespaceCache is the watch cache of one kind in one namespace.
type namespaceCache struct {
	informer cache.SharedIndexInformer
	started  time.Time
	// used is when a call last looked the cache up (under Cluster.mu): a
	// cache no call used for a while is stopped (idle.go).
	used time.Time
	stop chan struct{}
	// synced is closed when the cache has synced; failed when its list or
	// watch failed before that (the informer keeps retrying).
	synced, failed chan struct{}
	failOnce       sync.Once
	errors         atomic.Int32
	// fresh says whether the cache may be read (freshness.go); nil for the
	// caches of Gateways and their classes.
	fresh *freshness
}

// NewCluster returns a Reader for the cluster behind client, a REST client
// of it whose requests the reader gives absolute paths (any group and
// version's client will do, e.g. the Gateway API clientset's
// GatewayV1().RESTClient()). Every route it reads it reads with Decode.
func NewCluster(client rest.Interface, log *logrus.Entry) *Cluster {
	return &Cluster{
		client: client, log: log,
		versions:       map[routes.Kind]string{},
		importVersions: map[string]string{},
		informers:      map[informerKey]*namespaceCache{},
		parents:        map[parentKey]*namespaceCache{},
		overlay:        map[routes.Ref]*routes.Answer{},
		readByCalls:    map[routes.Ref]bool{},
		freshWhole:     map[routes.Ref]routes.Route{},
		schemas:        map[string]schemaDoc{},
		predecessors:   map[string]predecessorRead{},
		changes:        map[routes.Ref]chan struct{}{},
	}
}

// Close stops every watch cache; the Cluster reads with GETs afterwards.
func (c *Cluster) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.stopIdle != nil {
		close(c.stopIdle)
		c.stopIdle = nil
	}
	for key, nc := range c.informers {
		close(nc.stop)
		delete(c.informers, key)
	}
	for key, nc := range c.parents {
		close(nc.stop)
		delete(c.parents, key)
	}
}

// ServedVersion asks discovery once per kind which supported version the
// cluster serves, preferring v1. A failed discovery is not remembered, and a
// version the apiserver stops serving is forgotten (forget), so the next call
// asks again: a CRD upgrade needs no restart.
func (c *Cluster) ServedVersion(ctx context.Context, kind routes.Kind) (string, error) {
	discovered := func() (string, bool) {
		c.mu.Lock()
		defer c.mu.Unlock()
		v, ok := c.versions[kind]
		return v, ok
	}
	// Calls that start together (a hundred Rollouts on a fresh process)
	// wait for one discovery.
	return c.discoveries.Do(ctx, kind, discovered, func() (string, error) {
		v, err := c.discover(ctx, kind)
		if err == nil {
			c.mu.Lock()
			c.versions[kind] = v
			c.mu.Unlock()
		}
		return v, err
	})
}

// discover asks which supported version of kind the cluster serves.
func (c *Cluster) discover(ctx context.Context, kind routes.Kind) (string, error) {
	for _, version := range kind.Versions() {
		served, err := c.serves(ctx, version, kind.Resource())
		if err != nil {
			return "", fmt.Errorf("discovering the served versions of %s: %w", kind, err)
		}
		if served {
			return version, nil
		}
	}
	return "", fmt.Errorf("the cluster serves %s in none of the versions this plugin supports (%v): "+
		"install the Gateway API CRDs that define it", kind, kind.Versions())
}

// serves asks the apiserver whether it serves a resource of Gateway API's
// group in version: a GET of the group version's resource list, under ctx.
func (c *Cluster) serves(ctx context.Context, version string, resource string) (bool, error) {
	raw, err := body(c.client.Get().AbsPath("/apis", routes.Group, version).Do(ctx))
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(raw, &list); err != nil {
		return false, fmt.Errorf("decoding the resources of %s/%s: %w", routes.Group, version, err)
	}
	for _, res := range list.APIResources {
		if res.Name == resource {
			return true, nil
		}
	}
	return false, nil
}

// forget drops what the reader knows about kind in version after the
// apiserver answered that it does not serve it: the version and the watch
// caches of the kind. It says whether there was anything to forget.
func (c *Cluster) forget(kind routes.Kind, version string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.versions[kind] != version {
		return false
	}
	delete(c.versions, kind)
	delete(c.schemas, version)
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
		// reached the cache yet.
		return c.fresh(ctx, ref)
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
	if a, ok := c.overlay[ref]; ok && Newer(a.ResourceVersion, rv) {
		rv = a.ResourceVersion
	}
	return rv
}

// use records that a call reads the route: its watch cache keeps it whole
// from its next event on.
func (c *Cluster) use(ref routes.Ref) {
	c.mu.Lock()
	c.readByCalls[ref] = true
	c.mu.Unlock()
}

// keeps says whether a watch cache keeps the route whole.
func (c *Cluster) keeps(ref routes.Ref) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.readByCalls[ref]
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
		if n := now.(*cachedRoute); Newer(n.resourceVersion, r.ResourceVersion) {
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
		path := append(collection(ref.Kind.GVR(version), ref.Namespace), ref.Name)
		raw, err := body(c.client.Get().AbsPath(path...).Do(ctx))
		if apierr.NotServed(err) && again {
			c.forget(ref.Kind, version)
			continue
		}
		if err != nil {
			return routes.Route{}, err
		}
		r, err := routes.Decode(raw)
		if err == nil {
			// A cache still behind this read must not answer the next read
			// with an older route: a write whose answer was lost and whose
			// repeat was refused is known only from this read.
			c.remember(routes.Answered(r.DeepCopy(), nil))
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
		if apierr.NotServed(err) && again {
			c.forget(kind, version)
			continue
		}
		return list, err
	}
}

// Written records the apiserver's answer to the plugin's write.
func (c *Cluster) Written(a *routes.Answer) { c.remember(a) }

// remember puts a into the overlay, unless the overlay has a newer version
// of the route: calls writing one route at once (Rollouts that share it) may
// get their answers in one order and record them in the other.
func (c *Cluster) remember(a *routes.Answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.overlay[a.Ref]; ok && Newer(old.ResourceVersion, a.ResourceVersion) {
		return
	}
	c.overlay[a.Ref] = a
}

// newest answers with the overlay's route (what the plugin wrote, or read
// fresh) when the cache has not caught up with it yet, so an unchanged route
// is not written twice and a changed one is not taken for unchanged. A shared
// route (what the cache holds) is copied; one that is not is the caller's.
// An answer that cannot be read is forgotten: the cache's route it is. A
// slim route (what the cache holds of a route no call had used) is answered
// with the whole route read fresh since, if any; else it stays slim.
func (c *Cluster) newest(r routes.Route, slim, shared bool) (routes.Route, bool) {
	c.mu.Lock()
	w, ok := c.overlay[r.Ref]
	if ok && !Newer(w.ResourceVersion, r.ResourceVersion) {
		delete(c.overlay, r.Ref)
		ok = false
	}
	whole, hasWhole := c.freshWhole[r.Ref]
	c.mu.Unlock()
	if ok {
		written, err := w.Route()
		if err == nil {
			return written.DeepCopy(), false // the answer's route is shared, never changed
		}
		c.mu.Lock()
		if c.overlay[r.Ref] == w {
			delete(c.overlay, r.Ref)
		}
		c.mu.Unlock()
	}
	if slim {
		if hasWhole && !Newer(r.ResourceVersion, whole.ResourceVersion) {
			return whole.DeepCopy(), false
		}
		return r, true
	}
	if shared {
		return r.DeepCopy(), false
	}
	return r, false
}

// keepWhole keeps a route read fresh whose cache entry is slim, until an
// event of the route brings it whole into the cache.
func (c *Cluster) keepWhole(r routes.Route) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.freshWhole[r.Ref]; !ok || !Newer(old.ResourceVersion, r.ResourceVersion) {
		c.freshWhole[r.Ref] = r.DeepCopy()
	}
}

// caughtUp forgets the overlay's route once the watch cache holds that
// version or a newer one, so the overlay holds a route only for the moments
// between a write (or a fresh read) and its watch event, not a second copy
// of every route the plugin has written.
func (c *Cluster) caughtUp(obj any) {
	cr, ok := obj.(*cachedRoute)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.overlay[cr.ref]; ok && !Newer(w.ResourceVersion, cr.resourceVersion) {
		delete(c.overlay, cr.ref)
	}
	if cr.route != nil {
		delete(c.freshWhole, cr.ref)
	}
	if ch, ok := c.changes[cr.ref]; ok {
		close(ch)
		delete(c.changes, cr.ref)
	}
}

// Changed is closed at the route's next watch event, once the watch cache
// holds it (the informer stores an event before it tells caughtUp); nil
// when no watch cache of the route's kind and namespace runs, or the
// Cluster is closed. A channel nobody waits for any more stays until that
// event: one per route at most.
func (c *Cluster) Changed(ref routes.Ref) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, running := c.informers[informerKey{kind: ref.Kind, namespace: ref.Namespace}]; c.closed || !running {
		return nil
	}
	ch, ok := c.changes[ref]
	if !ok {
		ch = make(chan struct{})
		c.changes[ref] = ch
	}
	return ch
}

// Newer says resourceVersion a is newer than b, comparing them the way
// client-go's mutation cache does: as integers where both parse; otherwise
// it says no (what the cache holds wins).
func Newer(a, b string) bool {
	ai, errA := strconv.ParseUint(a, 10, 64)
	bi, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && ai > bi
}

// cacheFor starts, on first use, the watch cache of a kind in a namespace.
// It returns the cache once it has synced; nil (read with GET) while it has
// not: the first calls wait for it up to cacheSyncWait, unless its list has
// failed already.
func (c *Cluster) cacheFor(ctx context.Context, kind routes.Kind, namespace string) (cache.SharedIndexInformer, error) {
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
	nc.used = time.Now()
	c.mu.Unlock()
	return nc.ready(ctx), nil
}

// ready returns the cache once it has synced; nil while it has not: the
// first calls wait for it up to cacheSyncWait, unless its list has failed
// already.
func (nc *namespaceCache) ready(ctx context.Context) cache.SharedIndexInformer {
	if nc.informer.HasSynced() {
		if nc.fresh != nil && !nc.fresh.current(nc.informer.LastSyncResourceVersion()) {
			return nil // its watch broke: read from the apiserver until it has listed again
		}
		return nc.informer
	}
	wait := time.Until(nc.started.Add(cacheSyncWait))
	if wait <= 0 {
		return nil
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-nc.synced:
		return nc.informer
	case <-nc.failed:
	case <-nc.stop: // stopped unused (idle.go) or by Close: read with GETs
	case <-timer.C:
	case <-ctx.Done():
	}
	return nil
}

// start runs the watch cache of a resource in a namespace until its stop
// channel is closed. The informer retries a failed list or watch with backoff
// for as long as it runs, so a cache refused for want of RBAC heals when the
// permission is granted, without a restart.
func (c *Cluster) start(gvr schema.GroupVersionResource, namespace string) *namespaceCache {
	// A plain *cache.ListWatch: the reflector streams the initial list
	// through the watch (WatchList) where the apiserver can, and lists where
	// it cannot.
	fresh := &freshness{log: c.log.WithFields(logrus.Fields{"resource": gvr.Resource, "version": gvr.Version, "namespace": namespace})}
	keep := &keeping{uses: c.keeps, labels: &c.labelSets}
	nc := c.run(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := listRoutes(ctx, c.client, gvr, namespace, o, keep)
			if err == nil && o.Continue == "" {
				fresh.listed(l.ResourceVersion)
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if fresh.mustList() && (o.SendInitialEvents == nil || !*o.SendInitialEvents) {
				return nil, errListFirst(gvr)
			}
			return watchRoutes(ctx, c.client, gvr, namespace, o, fresh, keep)
		},
	}, &cachedRoute{}, gvr, namespace, "routes", c.caughtUp)
	nc.fresh = fresh
	return nc
}

// run runs a watch cache of what lw lists (objects like example) until its
// stop channel is closed, telling changed about every object it stores;
// what names the objects in its warnings.
func (c *Cluster) run(lw cache.ListerWatcher, example runtime.Object, gvr schema.GroupVersionResource, namespace, what string, changed func(any)) *namespaceCache {
	inf := cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{Indexers: cache.Indexers{}, ObjectDescription: gvr.String()})
	if changed != nil {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { changed(obj) },
			UpdateFunc: func(_, obj any) { changed(obj) },
		})
	}
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
			entry.Warnf("watch cache refused: grant the plugin's ServiceAccount list and watch on %s.%s in namespace %s; until then the plugin reads %s with GETs",
				gvr.Resource, gvr.Group, namespace, what)
		case n == 1 || n%20 == 0:
			entry.Warnf("watch cache failed; it retries with backoff, and the plugin reads %s with GETs until it has synced", what)
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

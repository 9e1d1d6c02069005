package kube

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// RouteReader reads routes. Get and List may answer from a watch cache.
//
// Every Route a reader returns belongs to the caller: it shares no map, slice
// or rule with what the reader keeps or hands to anyone else, so concurrent
// calls may change what they got without copying first.
type RouteReader interface {
	Get(ctx context.Context, ref routes.Ref) (routes.Route, error)
	List(ctx context.Context, kind routes.Kind, namespace string, selector labels.Selector) ([]routes.Route, error)
}

// GrantReader reads the ReferenceGrants of a namespace.
type GrantReader interface {
	ReferenceGrants(ctx context.Context, namespace string) ([]routes.ReferenceGrant, error)
}

// Reader is everything the orchestrator reads of a cluster: its routes, as
// RouteReader, and fresh (Fresh always asks the apiserver: the answer to a
// stale cache); the versions it serves; the write overlay; and the facts a
// decision takes (the parents' Gateways, ServiceImports, the argoproj-labs
// plugin's records, ReferenceGrants). Cluster is one.
type Reader interface {
	RouteReader
	GrantReader
	Fresh(ctx context.Context, ref routes.Ref) (routes.Route, error)
	// ResourceVersion is the newest resourceVersion of the route the reader
	// holds (what Get would answer with), "" if it holds none or cannot
	// tell without a request; it copies nothing.
	ResourceVersion(ctx context.Context, ref routes.Ref) string
	// NextEvent is closed at the route's next watch event, once Get can
	// answer with it; nil when no watch of the route runs to tell.
	NextEvent(ref routes.Ref) <-chan struct{}
	// ServedVersion is the API version the plugin reads and writes kind in.
	ServedVersion(ctx context.Context, kind routes.Kind) (string, error)
	// Written tells the reader about an object the plugin just wrote, so the
	// next Get does not answer with an older cached copy. The reader keeps
	// the answer, and reads it only if a call reads the route before the
	// watch cache has the write. Fresh keeps what it read the same way.
	Written(a *Answer)
	// Gateways says which GatewayClass carries each of a route's parents
	// and what it publishes; a parent that cannot be read is one whose
	// features are not known (routes.Gateway.Unknown).
	Gateways(ctx context.Context, parents routes.Parents) []routes.Gateway
	// ServiceImported says whether the cluster has a ServiceImport (ref is
	// one of routes.serviceImportGroups).
	ServiceImported(ctx context.Context, ref routes.ObjectRef) (bool, error)
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
	// (predecessor.go), by namespace/name, at most maxPredecessors.
	predecessors *bounded[string, predecessorRead]
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
	overlay map[routes.Ref]*Answer
	// readByCalls are the routes a call has read, at most maxReadByCalls:
	// their watch caches keep them whole; of every other route only what a
	// selector reads (slim). freshWhole holds the routes read fresh while
	// their cache entry is still slim, until an event of theirs brings them
	// whole (or readByCalls forgets them).
	readByCalls *bounded[routes.Ref, struct{}]
	freshWhole  map[routes.Ref]routes.Route
	// missing are the named routes a GET found missing, at most maxMissing,
	// with when (missing.go).
	missing *bounded[routes.Ref, time.Time]
	// now is the clock of missing and predecessors: time.Now.
	now       func() time.Time
	labelSets labelSets
	closed    bool
	// stopIdle ends the goroutine that stops idle caches (idle.go); nil
	// while none runs.
	stopIdle chan struct{}
	// changes are closed at the next watch event of their route (NextEvent).
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
// GatewayV1().RESTClient()). Every route it reads it reads with decodeRoute.
func NewCluster(client rest.Interface, log *logrus.Entry) *Cluster {
	return &Cluster{
		client: client, log: log,
		versions:       map[routes.Kind]string{},
		importVersions: map[string]string{},
		informers:      map[informerKey]*namespaceCache{},
		parents:        map[parentKey]*namespaceCache{},
		overlay:        map[routes.Ref]*Answer{},
		readByCalls:    newBounded[routes.Ref, struct{}](maxReadByCalls),
		missing:        newBounded[routes.Ref, time.Time](maxMissing),
		now:            time.Now,
		freshWhole:     map[routes.Ref]routes.Route{},
		schemas:        map[string]schemaDoc{},
		predecessors:   newBounded[string, predecessorRead](maxPredecessors),
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

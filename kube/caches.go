package kube

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The watch caches: one per kind and namespace, started at first use and
// waited for a moment while they sync.

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

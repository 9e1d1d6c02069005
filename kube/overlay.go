package kube

import "github.com/gatewayapi-ssa/rollouts-plugin/routes"

// The write overlay: the answers to the plugin's writes, kept until the
// watch cache has them, so that a read never answers with an older route.

// Written records the apiserver's answer to the plugin's write.
func (c *Cluster) Written(a *Answer) { c.remember(a) }

// remember puts a into the overlay, unless the overlay has a newer version
// of the route: calls writing one route at once (Rollouts that share it) may
// get their answers in one order and record them in the other.
func (c *Cluster) remember(a *Answer) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.found(a.Ref)
	if old, ok := c.overlay[a.Ref]; ok && routes.NewerVersion(old.ResourceVersion, a.ResourceVersion) {
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
	if ok && !routes.NewerVersion(w.ResourceVersion, r.ResourceVersion) {
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
		if hasWhole && !routes.NewerVersion(r.ResourceVersion, whole.ResourceVersion) {
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
	if old, ok := c.freshWhole[r.Ref]; !ok || !routes.NewerVersion(old.ResourceVersion, r.ResourceVersion) {
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
	c.found(cr.ref)
	if w, ok := c.overlay[cr.ref]; ok && !routes.NewerVersion(w.ResourceVersion, cr.resourceVersion) {
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

// NextEvent is closed at the route's next watch event, once the watch cache
// holds it (the informer stores an event before it tells caughtUp); nil
// when no watch cache of the route's kind and namespace runs, or the
// Cluster is closed. A channel nobody waits for any more stays until that
// event: one per route at most.
func (c *Cluster) NextEvent(ref routes.Ref) <-chan struct{} {
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

package kube

import (
	"maps"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A watch cache runs from the first call that needs it. One Rollout naming a
// thousand namespaces would leave a thousand watches open for the life of
// the process; so a cache no call has looked up for a while is stopped, and
// started again, as on first use, by the next call that needs it.

// StopIdleCaches makes the Cluster stop, until Close, every watch cache (of
// routes, of their parents, of ReferenceGrants) that no call has used for
// after; it looks every after/4, and at most once a second. after <= 0
// stops none: every cache runs until Close, as on a Cluster that was never
// told. Called again, it replaces the earlier after.
func (c *Cluster) StopIdleCaches(after time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopIdle != nil {
		close(c.stopIdle)
		c.stopIdle = nil
	}
	if c.closed || after <= 0 {
		return
	}
	done := make(chan struct{})
	c.stopIdle = done
	go func() {
		tick := time.NewTicker(max(after/4, time.Second))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				c.stopUnusedSince(now.Add(-after))
			}
		}
	}()
}

// stopUnusedSince stops the watch caches no call has looked up since
// cutoff. It holds c.mu, under which every lookup marks its cache used: a
// call that has just got a cache keeps it running, and one that comes after
// starts a new one.
func (c *Cluster) stopUnusedSince(cutoff time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	stopped := 0
	for key, nc := range c.informers {
		if nc.used.Before(cutoff) {
			close(nc.stop)
			delete(c.informers, key)
			c.forgetRoutesOf(key)
			stopped++
		}
	}
	for key, nc := range c.parents {
		if nc.used.Before(cutoff) {
			close(nc.stop)
			delete(c.parents, key)
			stopped++
		}
	}
	if stopped > 0 {
		c.log.WithField("caches", stopped).Debug("stopped the watch caches no call used for a while; the next call that needs one starts it again")
	}
}

// forgetRoutesOf drops, under c.mu, what the Cluster keeps beside a stopped
// route cache for its routes: only that cache's events would ever drop it.
// Whoever waits for such an event (NextEvent) is woken, to read afresh.
func (c *Cluster) forgetRoutesOf(key informerKey) {
	of := func(ref routes.Ref) bool { return ref.Kind == key.kind && ref.Namespace == key.namespace }
	maps.DeleteFunc(c.overlay, func(ref routes.Ref, _ *Answer) bool { return of(ref) })
	c.readByCalls.deleteIf(of)
	c.missing.deleteIf(of)
	maps.DeleteFunc(c.freshWhole, func(ref routes.Ref, _ routes.Route) bool { return of(ref) })
	maps.DeleteFunc(c.changes, func(ref routes.Ref, ch chan struct{}) bool {
		if of(ref) {
			close(ch)
			return true
		}
		return false
	})
}

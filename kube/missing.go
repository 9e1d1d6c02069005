package kube

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// missingFor is how long a named route a GET found missing is answered as
// missing without another GET: a Rollout naming routes that are not there
// would otherwise cost a GET per route on every reconcile. Its watch event
// or a write of the plugin makes it found at once.
const missingFor = 10 * time.Second

// freshUnlessMissing reads a route the watch cache does not hold with a
// GET, unless a GET found it missing within missingFor; a GET that finds it
// missing is remembered.
func (c *Cluster) freshUnlessMissing(ctx context.Context, ref routes.Ref) (routes.Route, error) {
	c.mu.Lock()
	since, known := c.missing.get(ref)
	c.mu.Unlock()
	if known && c.now().Sub(since) < missingFor {
		return routes.Route{}, apierrors.NewNotFound(ref.Kind.GVR("").GroupResource(), ref.Name)
	}
	r, err := c.fresh(ctx, ref)
	if apierrors.IsNotFound(err) && !kubeclient.NotServed(err) {
		c.mu.Lock()
		c.missing.put(ref, c.now())
		c.mu.Unlock()
	}
	return r, err
}

// found forgets, under c.mu, that the route was missing: an event of its
// watch cache or an answer of the apiserver has it.
func (c *Cluster) found(ref routes.Ref) { c.missing.delete(ref) }

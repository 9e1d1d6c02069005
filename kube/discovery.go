package kube

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Discovery: which version of a kind the cluster serves, asked once per
// kind and asked again when the apiserver stops serving it.

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
	if v, ok := discovered(); ok {
		return v, nil // every call but a kind's first: no flight to look for
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
	path, err := objectPath("/apis", routes.Group, version)
	if err != nil {
		return false, err
	}
	raw, err := body(c.client.Get().AbsPath(path...).Do(ctx))
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

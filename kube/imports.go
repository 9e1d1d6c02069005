package kube

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// ServiceImported says whether the cluster has the ServiceImport ref names,
// read with a GET in the version the cluster prefers of ref's group (asked
// once per group and remembered). A group the cluster does not serve is an
// error saying so: no ServiceImport of it can exist there.
func (c *Cluster) ServiceImported(ctx context.Context, ref routes.ObjectRef) (bool, error) {
	version, err := c.importVersion(ctx, ref.Group)
	if err != nil {
		return false, err
	}
	path, err := objectPath("/apis", ref.Group, version, "namespaces", ref.Namespace, "serviceimports", ref.Name)
	if err != nil {
		return false, fmt.Errorf("reading %s: %w", ref, err)
	}
	raw, err := body(c.client.Get().AbsPath(path...).Do(ctx))
	switch {
	case err == nil:
		var got metav1.PartialObjectMetadata
		if err := json.Unmarshal(raw, &got); err != nil {
			return false, fmt.Errorf("reading %s: %w", ref, err)
		}
		if err := answerIs(objectID{"ServiceImport", ref.Namespace, ref.Name}, objectID{got.Kind, got.Namespace, got.Name}); err != nil {
			return false, err
		}
		return true, nil
	case kubeclient.NotServed(err):
		c.mu.Lock()
		delete(c.importVersions, ref.Group) // the CRD changed: ask again next time
		c.mu.Unlock()
		return false, fmt.Errorf("reading %s: %s/%s is no longer served: %w", ref, ref.Group, version, err)
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("reading %s: %w", ref, kubeclient.AsPermissionError(err, "get", "serviceimports."+ref.Group, ref.Namespace))
}

// importVersion is the version of group the cluster prefers.
func (c *Cluster) importVersion(ctx context.Context, group string) (string, error) {
	c.mu.Lock()
	v, ok := c.importVersions[group]
	c.mu.Unlock()
	if ok {
		return v, nil
	}
	path, err := objectPath("/apis", group)
	if err != nil {
		return "", fmt.Errorf("discovering the versions of %s: %w", group, err)
	}
	raw, err := body(c.client.Get().AbsPath(path...).Do(ctx))
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("the cluster serves no API group %s, so it has no ServiceImport of that group: install the Multi-Cluster Services CRDs "+
			"of your platform in the cluster that holds the route, or name the backends as Services", group)
	}
	if err != nil {
		return "", fmt.Errorf("discovering the versions of %s: %w", group, err)
	}
	var g metav1.APIGroup
	if err := json.Unmarshal(raw, &g); err != nil {
		return "", fmt.Errorf("decoding API group %s: %w", group, err)
	}
	if g.PreferredVersion.Version == "" {
		return "", fmt.Errorf("API group %s names no preferred version", group)
	}
	c.mu.Lock()
	c.importVersions[group] = g.PreferredVersion.Version
	c.mu.Unlock()
	return g.PreferredVersion.Version, nil
}

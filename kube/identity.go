package kube

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
)

// A claim records which cluster's Rollout made it, so that the members of a
// fleet, which run the same Rollout (namespace and name) against one route
// in a config cluster, never take each other's claims. A cluster is named as
// KEP-2149 (ClusterProperty, about.k8s.io) names a member of a clusterset;
// a cluster without one by the platform team's -cluster-name, else by the
// UID of its kube-system namespace, which no other cluster has.

// clusterPropertyName is the ClusterProperty that names a member cluster of
// a clusterset (KEP-2149).
const clusterPropertyName = "cluster.clusterset.k8s.io"

// ClusterName is how a cluster's claims name it, and where the name comes
// from.
type ClusterName struct {
	Name string
	// Source says where Name was read: the ClusterProperty, the flag, or
	// the kube-system namespace.
	Source string
	// UID is the UID of the cluster's kube-system namespace, which the
	// claims record beside Name: it stays when the name changes, and two
	// clusters given one name do not share it.
	UID string
}

// NameCluster names the cluster client reaches: the value of its
// ClusterProperty cluster.clusterset.k8s.io where it has one, else flag
// (-cluster-name) when it is set, else the UID of namespace kube-system,
// which it reads in every case. A ClusterProperty that cannot be read for
// want of a permission is taken for none (warn says so). Only calls on the
// routes of a route cluster need the name.
func NameCluster(ctx context.Context, client rest.Interface, flag string, warn func(string)) (ClusterName, error) {
	var ns metav1.PartialObjectMetadata
	path, err := objectPath("/api/v1", "namespaces", "kube-system")
	var raw []byte
	if err == nil {
		raw, err = body(client.Get().AbsPath(path...).Do(ctx))
	}
	if err == nil {
		err = json.Unmarshal(raw, &ns)
	}
	if err == nil {
		err = answerIs(objectID{"Namespace", "", "kube-system"}, objectID{ns.Kind, ns.Namespace, ns.Name})
	}
	if err == nil && ns.UID == "" {
		err = fmt.Errorf("namespace kube-system has no uid")
	}
	if err != nil {
		return ClusterName{}, fmt.Errorf("naming this cluster for the claims on the routes of route clusters (by the UID of namespace kube-system, which the claims record): %w",
			kubeclient.AsPermissionError(err, "get", "namespaces (kube-system)", "kube-system"))
	}
	uid := string(ns.UID)
	value, err := clusterProperty(ctx, client)
	switch {
	case err == nil && value != "":
		return ClusterName{Name: value, Source: "ClusterProperty " + clusterPropertyName, UID: uid}, nil
	case apierrors.IsForbidden(err):
		warn(fmt.Sprintf("cannot read ClusterProperty %s (grant get on clusterproperties.about.k8s.io, as install/base does); naming the cluster without it", clusterPropertyName))
	case err != nil:
		return ClusterName{}, fmt.Errorf("reading ClusterProperty %s, which names this cluster in a clusterset: %w", clusterPropertyName, err)
	}
	if flag != "" {
		return ClusterName{Name: flag, Source: "-cluster-name", UID: uid}, nil
	}
	return ClusterName{Name: uid, Source: "the UID of namespace kube-system", UID: uid}, nil
}

// clusterProperty is the value of the cluster's ClusterProperty
// cluster.clusterset.k8s.io, "" when the cluster serves no ClusterProperty
// or has none of that name.
func clusterProperty(ctx context.Context, client rest.Interface) (string, error) {
	path, err := objectPath("/apis", "about.k8s.io")
	if err != nil {
		return "", err
	}
	raw, err := body(client.Get().AbsPath(path...).Do(ctx))
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var g metav1.APIGroup
	if err := json.Unmarshal(raw, &g); err != nil || g.PreferredVersion.Version == "" {
		return "", fmt.Errorf("reading API group about.k8s.io: no preferred version (%v)", err)
	}
	if path, err = objectPath("/apis", "about.k8s.io", g.PreferredVersion.Version, "clusterproperties", clusterPropertyName); err != nil {
		return "", err
	}
	raw, err = body(client.Get().AbsPath(path...).Do(ctx))
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	var p struct {
		Spec struct {
			Value string `json:"value"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", fmt.Errorf("reading ClusterProperty %s: %w", clusterPropertyName, err)
	}
	return p.Spec.Value, nil
}

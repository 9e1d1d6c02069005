package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// predecessorFor is how long a read of the argoproj-labs plugin's ConfigMap
// is remembered: it is read only while a Rollout has no claim on a route,
// which a Rollout at rest may not have for good, and it no longer changes
// once that plugin is gone.
const predecessorFor = time.Minute

// predecessorRead is one read of that ConfigMap.
type predecessorRead struct {
	records routes.PredecessorRecords
	at      time.Time
}

// PredecessorRecords are the header rules the argoproj-labs/gatewayAPI
// plugin recorded in ConfigMap name of namespace (routes.PredecessorRecords),
// read at most once a minute. A ConfigMap that is not there records
// nothing; one the plugin may not read records nothing either, and the log
// says so once per ConfigMap (install/base grants get on the default one).
func (c *Cluster) PredecessorRecords(ctx context.Context, namespace, name string) (routes.PredecessorRecords, error) {
	key := namespace + "/" + name
	c.mu.Lock()
	read, ok := c.predecessors.get(key)
	c.mu.Unlock()
	if ok && c.now().Sub(read.at) < predecessorFor {
		return read.records, nil
	}
	var cm struct {
		metav1.TypeMeta
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
		Data map[string]string `json:"data"`
	}
	path, err := objectPath("/api/v1", "namespaces", namespace, "configmaps", name)
	if err != nil {
		return routes.PredecessorRecords{}, fmt.Errorf("reading ConfigMap %s, where the argoproj-labs/gatewayAPI plugin recorded its header rules: %w", key, err)
	}
	raw, err := body(c.client.Get().AbsPath(path...).Do(ctx))
	switch {
	case apierrors.IsNotFound(err):
	case apierrors.IsForbidden(err):
		if !ok {
			c.log.WithFields(logrus.Fields{"configMap": key}).Warn("cannot read the argoproj-labs/gatewayAPI plugin's ConfigMap (grant get on it; install/base does for " +
				routes.PredecessorConfigMap + "): the header rules it recorded there are not adopted, and stay on the routes after the rollout")
		}
	case err != nil:
		return routes.PredecessorRecords{}, fmt.Errorf("reading ConfigMap %s, where the argoproj-labs/gatewayAPI plugin recorded its header rules: %w", key, err)
	default:
		if err := json.Unmarshal(raw, &cm); err != nil {
			return routes.PredecessorRecords{}, fmt.Errorf("reading ConfigMap %s: %w", key, err)
		}
		if err := answerIs(objectID{"ConfigMap", namespace, name}, objectID{cm.Kind, cm.Metadata.Namespace, cm.Metadata.Name}); err != nil {
			return routes.PredecessorRecords{}, err
		}
	}
	records, err := routes.ReadPredecessorRecords(cm.Data)
	if err != nil {
		return routes.PredecessorRecords{}, fmt.Errorf("ConfigMap %s: %w", key, err)
	}
	c.mu.Lock()
	c.predecessors.put(key, predecessorRead{records: records, at: c.now()})
	c.mu.Unlock()
	return records, nil
}

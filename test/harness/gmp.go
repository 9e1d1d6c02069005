package harness

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// podMonitoringCRD is the part of Google Cloud Managed Service for
// Prometheus's PodMonitoring (monitoring.googleapis.com/v1) that
// docs/metrics.md uses. Its module is not on the Go module proxy, so this
// is written from the published CRD (charts/operator/crds of
// GoogleCloudPlatform/prometheus-engine, read 2026-12-07): spec.selector
// and spec.endpoints, both required, and of an endpoint port (required,
// name or number), interval (required), path, timeout and scheme. A field
// beyond these fails the docs' strict apply, a misspelt one included.
const podMonitoringCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: podmonitorings.monitoring.googleapis.com
spec:
  group: monitoring.googleapis.com
  names: {kind: PodMonitoring, listKind: PodMonitoringList, plural: podmonitorings, singular: podmonitoring}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [endpoints, selector]
            properties:
              selector:
                type: object
                properties:
                  matchLabels:
                    type: object
                    additionalProperties: {type: string}
              endpoints:
                type: array
                items:
                  type: object
                  required: [interval, port]
                  properties:
                    port:
                      anyOf: [{type: integer}, {type: string}]
                      x-kubernetes-int-or-string: true
                    interval: {type: string}
                    timeout: {type: string}
                    path: {type: string}
                    scheme: {type: string, enum: [http, https]}
`

// GoogleManagedPrometheusCRDs are the CRDs of Google Cloud Managed Service
// for Prometheus that documented objects are checked against: the part of
// PodMonitoring they use (podMonitoringCRD).
func GoogleManagedPrometheusCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict([]byte(podMonitoringCRD), &crd); err != nil {
		return nil, err
	}
	return []*apiextensionsv1.CustomResourceDefinition{&crd}, nil
}

package harness

import (
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// MCSVersion is the release of the Multi-Cluster Services API
// (sigs.k8s.io/mcs-api) whose ServiceImport CRD a config cluster serves.
const MCSVersion = "v0.5.2"

// MultiClusterCRDs are the ServiceImport and ServiceExport CRDs of two of
// the groups whose ServiceImports the plugin takes for their Services: the
// Multi-Cluster Services API's as published (multicluster.x-k8s.io;
// v1alpha1 and v1beta1), and GKE's (net.gke.io, served as v1), which Google
// does not publish: the same schemas under GKE's group and version. The
// plugin only reads a ServiceImport by name, so the schema does not matter
// to it; the docs' ServiceExports are checked against them.
func MultiClusterCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	m, err := download("sigs.k8s.io/mcs-api@" + MCSVersion)
	if err != nil {
		return nil, err
	}
	mcs, err := readCRDFiles(filepath.Join(m.Dir, "config", "crd", "multicluster.x-k8s.io_service*.yaml"))
	if err != nil {
		return nil, err
	}
	out := mcs
	for _, crd := range mcs {
		gke := crd.DeepCopy()
		gke.Name = gke.Spec.Names.Plural + ".net.gke.io"
		gke.Spec.Group = "net.gke.io"
		gke.Labels, gke.Annotations = nil, nil
		for i := range gke.Spec.Versions {
			if gke.Spec.Versions[i].Storage {
				v := gke.Spec.Versions[i]
				v.Name = "v1"
				gke.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{v}
				break
			}
		}
		out = append(out, gke)
	}
	return out, nil
}

// StartConfigCluster brings up a cluster as Start does, serving the
// ServiceImport and ServiceExport CRDs too (MultiClusterCRDs): the config
// cluster of a fleet, where the routes of multi-cluster Gateways live.
func StartConfigCluster(ch Channel) (*Cluster, error) {
	crds, err := CRDs(ch)
	if err != nil {
		return nil, err
	}
	mcs, err := MultiClusterCRDs()
	if err != nil {
		return nil, err
	}
	return start(crds, mcs...)
}

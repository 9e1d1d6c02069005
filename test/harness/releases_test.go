package harness

import (
	"strings"
	"testing"
)

// Every release's channel reads from its module zip, v1.7.0 (which this Go
// cannot build) included, and holds Gateway API CRDs only: not the x-k8s.io
// CRDs, the ValidatingAdmissionPolicy or kustomization.yaml beside them.
func TestReleaseCRDsAreTheGatewayAPICRDsOfTheChannel(t *testing.T) {
	for _, release := range Releases {
		for _, ch := range []Channel{Standard, Experimental} {
			crds, err := ReleaseCRDs(release, ch)
			if err != nil {
				t.Fatalf("%s %s: %v", release, ch, err)
			}
			kinds := map[string]bool{}
			for _, crd := range crds {
				if crd.Kind != "CustomResourceDefinition" || crd.Spec.Group != "gateway.networking.k8s.io" {
					t.Errorf("%s %s: %s %s (group %s) is not a Gateway API CRD", release, ch, crd.Kind, crd.Name, crd.Spec.Group)
				}
				if v := crd.Annotations["gateway.networking.k8s.io/bundle-version"]; v != release {
					t.Errorf("%s %s: %s is of bundle-version %s", release, ch, crd.Name, v)
				}
				if c := crd.Annotations["gateway.networking.k8s.io/channel"]; c != string(ch) {
					t.Errorf("%s %s: %s is of channel %s", release, ch, crd.Name, c)
				}
				kinds[crd.Spec.Names.Kind] = true
			}
			for _, kind := range []string{"Gateway", "GatewayClass", "HTTPRoute", "GRPCRoute"} {
				if !kinds[kind] {
					t.Errorf("%s %s: no %s CRD among %d", release, ch, kind, len(crds))
				}
			}
		}
	}
	if _, err := ReleaseCRDs("v1.6.3", V1Alpha2Only); err == nil || !strings.Contains(err.Error(), "no channel") {
		t.Errorf("ReleaseCRDs(v1.6.3, %s) = %v, want an error: releases have only standard and experimental", V1Alpha2Only, err)
	}
}

package routes

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/meta"
	gwscheme "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned/scheme"
)

// Every kind, in every version the plugin reads and writes, is a type of
// Gateway API's own scheme, and its resource is the plural the apiserver
// serves it under (a misspelt resource would make discovery miss the kind).
func TestKindsAreGatewayAPITypes(t *testing.T) {
	for _, k := range Kinds {
		if len(k.Versions()) == 0 {
			t.Errorf("%s: no versions", k)
		}
		for _, v := range k.Versions() {
			gvk := k.GVR(v).GroupVersion().WithKind(string(k))
			if !gwscheme.Scheme.Recognizes(gvk) {
				t.Errorf("%s: Gateway API's scheme has no %s", k, gvk)
				continue
			}
			plural, _ := meta.UnsafeGuessKindToResource(gvk)
			if plural.Resource != k.Resource() {
				t.Errorf("%s %s: resource %q, want %q", k, v, k.Resource(), plural.Resource)
			}
		}
	}
}

// The kinds, their resources and their versions, preferred first: v1 where
// Gateway API's standard channel has it, the experimental channel's
// v1alpha2 (or HTTPRoute's v1beta1) for older installs.
func TestKindVersions(t *testing.T) {
	got := map[Kind][]string{}
	for _, k := range Kinds {
		got[k] = append([]string{k.GroupResource()}, k.Versions()...)
	}
	want := map[Kind][]string{
		HTTPRoute: {"httproutes.gateway.networking.k8s.io", "v1", "v1beta1"},
		GRPCRoute: {"grpcroutes.gateway.networking.k8s.io", "v1", "v1alpha2"},
		TCPRoute:  {"tcproutes.gateway.networking.k8s.io", "v1", "v1alpha2"},
		TLSRoute:  {"tlsroutes.gateway.networking.k8s.io", "v1", "v1alpha2"},
		UDPRoute:  {"udproutes.gateway.networking.k8s.io", "v1", "v1alpha2"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kinds (-want +got):\n%s", diff)
	}
	if Kind("ServiceRoute").Resource() != "" || Kind("ServiceRoute").Versions() != nil {
		t.Error("a kind the plugin does not know has a resource or versions")
	}
}

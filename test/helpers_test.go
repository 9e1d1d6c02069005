package test

import (
	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/argoproj/argo-rollouts/utils/plugin/types"
	"k8s.io/apimachinery/pkg/runtime/schema"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

var httpRoutes = schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: "httproutes"}

func gwHeader(name, value string) gwv1.HTTPHeaderMatch {
	return gwv1.HTTPHeaderMatch{Name: gwv1.HTTPHeaderName(name), Value: value}
}

func hostnames(h []gwv1.Hostname) []string {
	out := make([]string, len(h))
	for i, n := range h {
		out[i] = string(n)
	}
	return out
}

// rpcErr is what the plugin's calls return.
type rpcErr = types.RpcError

type rpcAdapter struct {
	p interface {
		SetWeight(*v1alpha1.Rollout, int32, []v1alpha1.WeightDestination) types.RpcError
	}
}

func (r rpcAdapter) SetWeight(ro *v1alpha1.Rollout, w int32, d []v1alpha1.WeightDestination) rpcErr {
	return r.p.SetWeight(ro, w, d)
}

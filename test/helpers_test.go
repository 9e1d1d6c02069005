package test

import (
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

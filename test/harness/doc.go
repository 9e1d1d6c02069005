// Package harness runs what the tests and the demo need: a real kube-apiserver
// and etcd (envtest) with the Gateway API CRDs of a chosen channel, a loopback
// proxy in front of the apiserver that records every request the plugin sends,
// and the real plugin binary started over go-plugin RPC exactly as Argo
// Rollouts starts it.
package harness

// Package cluster runs a Kubernetes cluster made of local processes and the
// real Argo Rollouts controller loading this repository's plugin binary, and
// drives Rollouts on it the way a user does. `make e2e` (test/e2e, behind the
// build tag e2e) and `make demo` (test/demo) run on it; docs/e2e.md describes
// the cluster.
//
// Start finds or builds the binaries (hack/envtest-assets.sh for etcd and
// kube-apiserver, hack/e2e-assets.sh for kube-controller-manager,
// kube-scheduler, kwok and the Rollouts controller, both cached outside the
// repository), builds the plugin, and starts:
//
//   - etcd and kube-apiserver through envtest, with the Gateway API v1.6.3
//     standard CRDs and the Argo Rollouts CRDs installed;
//   - kube-controller-manager and kube-scheduler;
//   - kwok with one fake Node, on which pods become Running and Ready;
//   - the Rollouts controller, with the ConfigMap argo-rollouts-config that
//     registers the plugin as argoproj-labs/gatewayAPI (file://).
//
// Every process runs in a process group of its own with its output in
// <dir>/logs/<process>.log; Stop stops them all (the controller first, with
// the plugin process in its group), and the kernel kills them if the calling
// process dies.
//
// The drive helpers (SetImage, Promote, Abort, Rollout, Route, Rules, Events,
// Await, AwaitRollout) act as `kubectl argo rollouts` and read what the
// controller and the plugin did.
package cluster

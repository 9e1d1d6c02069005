// Package cluster runs a Kubernetes cluster made of local processes and the
// real Argo Rollouts controller loading this repository's plugin binary, and
// drives Rollouts on it the way a user does. `make e2e` (test/e2e, behind the
// build tag e2e) and `make demo` (test/demo) run on it; docs/performance/e2e.md describes
// the cluster.
//
// Start finds or builds the binaries (hack/envtest-assets.sh for etcd and
// kube-apiserver, hack/e2e-assets.sh for kube-controller-manager,
// kube-scheduler, kwok and the Rollouts controller, hack/traefik-assets.sh
// for Traefik, all cached outside the repository), builds the plugin, and
// starts:
//
//   - etcd and kube-apiserver through envtest, with the Gateway API v1.6.3
//     standard CRDs (the experimental TCPRoute CRD in place of the standard
//     one: Traefik reads TCPRoute at v1alpha2) and the Argo Rollouts CRDs;
//   - kube-controller-manager (without the EndpointSlice, mirroring and
//     Endpoints controllers: the test writes its backends' EndpointSlices)
//     and kube-scheduler;
//   - kwok with one fake Node, on which pods become Running and Ready;
//   - the Rollouts controller, with the ConfigMap argo-rollouts-config that
//     registers the plugin as argoproj-labs/gatewayAPI (file://);
//   - the data plane: a network namespace for the backends (package
//     traffic), and Traefik v3.7 out of cluster with its Gateway API
//     provider (StartTraefik: a function of a cluster's kubeconfig, the
//     listeners' ports and flags), one entrypoint per listener on 127.0.0.1,
//     the GatewayClass traefik and the Gateway gateway/traefik whose
//     listeners have the entrypoints' ports: web (HTTP), grpc (HTTP without
//     a read timeout), tls (passthrough) and one TCP listener per TCPRoute.
//
// Every process runs in a process group of its own with its output in
// <dir>/logs/<process>.log; Stop stops them all (the controller first, with
// the plugin process in its group), then the backends, and deletes the
// network namespace; the kernel kills the processes if the calling process
// dies (a namespace left by a killed run is deleted by the next one).
//
// The drive helpers (SetImage, Promote, Abort, Rollout, Route, Rules, Events,
// Await, AwaitRollout) act as `kubectl argo rollouts` and read what the
// controller and the plugin did; Backends.Serve gives a Service a backend,
// Meter sends requests through Traefik, WatchRoute times a route's changes
// and Traefik's status for them, ServiceVersion says which version a
// Service's pods run.
package cluster

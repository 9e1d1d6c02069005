// Package gitopstest is what the GitOps test modules (test/gitops/argocd,
// test/gitops/flux) share: the plugin's side of a rollout (a control plane
// and the real plugin binary, run by the root module's test/gitops/driver),
// the route kept in Git for each route kind and the changes a person makes
// to it, and the recipes read from docs/gitops.md, so the docs cannot drift
// from what the tests prove.
//
// It is a module of its own with the smallest requirements, so each test
// module builds it against the Kubernetes libraries its GitOps tool pins.
package gitopstest

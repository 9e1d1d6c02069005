// Package argocd proves the Argo CD recipe of docs/gitops.md with Argo CD's
// own diff code (github.com/argoproj/argo-cd/v3 util/argo/diff, v3.1.8): the
// Application is read from the page, its ignoreDifferences and sync options
// are turned into a diff config as the application controller does
// (controller/state.go CompareAppState), and StateDiffs compares Git's route
// with the live one while the real plugin binary walks a rollout on it.
//
// It is a module of its own because Argo CD pins Kubernetes libraries older
// than the plugin's; `make gitops` runs it (part of .ci/run).
package argocd

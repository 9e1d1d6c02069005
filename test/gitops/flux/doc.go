// Package flux proves the Flux recipe of docs/gitops.md with Flux's own
// apply code (github.com/fluxcd/pkg/ssa ApplyAllStaged): the Kustomization is
// read from the page and its apply options are built as kustomize-controller
// builds them (internal/controller/kustomization_controller.go, apply), then
// each reconciliation applies Git's route while the real plugin binary walks
// a rollout on it.
//
// It is a module of its own because Flux pins other Kubernetes libraries than
// the plugin. go.mod builds it with the libraries of kustomize-controller
// v1.9.4 (fluxcd/pkg/ssa v0.76.1); go.v1.10.mod with those of v1.10.1
// (ssa v0.83.0, which needs Go 1.27: GOTOOLCHAIN=go1.27.3). Both options
// builders are the same but for FieldManagersBeforeDryRun, which v1.10.1
// fills only from a flag that is empty by default. `make gitops` runs both.
//
// It also builds docs/install.md's kustomizations with kustomize (its
// dependency here, not the plugin's) over Argo Rollouts v1.10.1's
// install.yaml and checks that the controller would load the plugin from
// each (loads_test.go), and checks the page's argo-helm values against the
// chart's keys and against install/ (helm_test.go).
package flux

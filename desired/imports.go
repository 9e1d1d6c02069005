package desired

import (
	"fmt"
	"slices"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// MissingImportError says an experiment step would add a backendRef to a
// ServiceImport that the route's cluster does not have: the route reaches
// the canary through a ServiceImport, so the experiment's Service is added
// as one too, and a gateway sends the share of a ServiceImport that does not
// exist nowhere (GKE answers 500 for it). Nothing is written.
type MissingImportError struct {
	Route   routes.Ref
	Rollout string
	Import  routes.ObjectRef
}

// Reason is the Event reason of the error (package events).
func (e *MissingImportError) Reason() string { return "ServiceImportMissing" }

func (e *MissingImportError) Error() string {
	return fmt.Sprintf("%s: rollout %s: the experiment's Service %s/%s would be added as %s, as the route reaches the canary through a ServiceImport, "+
		"but the route's cluster has no such ServiceImport; nothing was written. Export the Service from the cluster that runs it "+
		"(a ServiceExport named %s in namespace %s; give the experiment template a fixed Service name, templates[].service.name, to export it before the step), "+
		"and the controller's next try of the step adds it", e.Route, e.Rollout, e.Import.Namespace, e.Import.Name, e.Import, e.Import.Name, e.Import.Namespace)
}

// newImports are the ServiceImports res adds to the live route for an
// experiment, each once, that the Rollout's claim did not record before:
// each must exist in the route's cluster (CheckImports). A result that adds
// none needs nothing read.
func newImports(res Result, live routes.Route, env Env) []routes.ObjectRef {
	var before, out []routes.ObjectRef
	read := false
	for _, b := range res.Claim.Backends {
		target := b.Target()
		if !target.IsServiceImport() {
			continue
		}
		if !read { // the claims are read only for a result that adds a ServiceImport
			before, read = recordedBackends(live, env.Rollout), true
		}
		if !slices.Contains(before, target) {
			before = append(before, target)
			out = append(out, target)
		}
	}
	return out
}

// recordedBackends are the backends the Rollout's claim on live records.
func recordedBackends(live routes.Route, rollout string) []routes.ObjectRef {
	claims, err := routes.ReadClaims(live)
	if err != nil {
		return nil
	}
	var out []routes.ObjectRef
	for _, b := range claims[rollout].Backends {
		out = append(out, b.Target())
	}
	return out
}

// ImportRead is what reading one ServiceImport answered: whether the
// route's cluster has it, or the error of the read.
type ImportRead struct {
	Import routes.ObjectRef
	Exists bool
	Err    error
}

// checkImports refuses a result whose new ServiceImports (NewImports, read
// in that order) the route's cluster lacks (MissingImportError), or fails
// with a read's error.
func checkImports(live routes.Route, env Env, reads []ImportRead) error {
	for _, r := range reads {
		if r.Err != nil {
			return routes.RouteError(live.Ref, fmt.Errorf("rollout %s: checking that the experiment's %s exists: %w", env.Rollout, r.Import, r.Err))
		}
		if !r.Exists {
			return &MissingImportError{Route: live.Ref, Rollout: env.Rollout, Import: r.Import}
		}
	}
	return nil
}

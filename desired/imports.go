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

// WithImports is c with every ServiceImport it adds for an experiment
// checked with imported, which says whether the route's cluster has it: a
// call that adds one the cluster lacks is refused (MissingImportError); one
// that cannot tell fails with imported's error. A call that adds no
// ServiceImport asks nothing.
func WithImports(c Intent, imported func(routes.ObjectRef) (bool, error)) Intent {
	return importsChecked{call: c, imported: imported}
}

type importsChecked struct {
	call     Intent
	imported func(routes.ObjectRef) (bool, error)
}

func (c importsChecked) Desired(live routes.Route, env Env) (Result, error) {
	res, err := c.call.Desired(live, env)
	if err != nil || res.Unchanged {
		return res, err
	}
	var before []routes.ObjectRef
	if claims, err := routes.ReadClaims(live); err == nil {
		for _, b := range claims[env.Rollout].Backends {
			before = append(before, b.Target())
		}
	}
	for _, b := range res.Claim.Backends {
		target := b.Target()
		if !target.IsServiceImport() || slices.Contains(before, target) {
			continue
		}
		ok, err := c.imported(target)
		if err != nil {
			return Result{}, routes.RouteError(live.Ref, fmt.Errorf("rollout %s: checking that the experiment's %s exists: %w", env.Rollout, target, err))
		}
		if !ok {
			return Result{}, &MissingImportError{Route: live.Ref, Rollout: env.Rollout, Import: target}
		}
		before = append(before, target) // asked once per call, whatever the rules
	}
	return res, nil
}

package ssa

import (
	"fmt"
	"strings"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// ConflictError says another field manager changed values the plugin manages
// while a rollout is in progress, and the plugin's next write would change
// them back. The plugin leaves the route as it is and returns this error
// instead of fighting.
type ConflictError struct {
	Route   routes.Ref
	Rollout string
	// Managers own spec.rules now (the plugin no longer does).
	Managers []string
	Drift    []routes.Drift
	// Rules describes changes to rules the plugin added.
	Rules []string
}

func (e *ConflictError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: conflict: while rollout %s is in progress, spec.rules was changed by %s; ",
		e.Route, e.Rollout, strings.Join(e.Managers, ", "))
	var drift []string
	for _, d := range e.Drift {
		drift = append(drift, d.String())
	}
	drift = append(drift, e.Rules...)
	b.WriteString(strings.Join(drift, "; "))
	b.WriteString(". The plugin left the route as it is. Resolve it by reverting that change, by making the other owner ignore the rollout's weights " +
		"(docs/gitops.md), or by setting conflictPolicy: Force in the Rollout's plugin config to let the plugin take over")
	return b.String()
}

package ssa

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// DryRun sends the apply of d for the live route as a server-side dry run,
// as the plugin's write would be sent (same field manager, force, the live
// resourceVersion): the apiserver validates it (schema, CEL, limits,
// admission) and stores nothing.
func (w *Writer) DryRun(ctx context.Context, live routes.Route, d Content) error {
	_, _, err := w.apply(ctx, live, d, metav1.ApplyOptions{FieldManager: w.fieldManager, Force: true, DryRun: []string{metav1.DryRunAll}}, false)
	if err != nil {
		return routes.RouteError(live.Ref, Explain(ctx, err, live.Ref, "patch"))
	}
	return nil
}

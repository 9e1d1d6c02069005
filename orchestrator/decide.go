package orchestrator

import (
	"context"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// Facts reads what a decision needs of a route's cluster besides the route
// (kube.Reader; for a plan from files, plan.Files).
type Facts interface {
	// PredecessorRecords are the header rules the argoproj-labs plugin
	// recorded in ConfigMap name of namespace.
	PredecessorRecords(ctx context.Context, namespace, name string) (routes.PredecessorRecords, error)
	// Gateways say what each of a route's parents carries.
	Gateways(ctx context.Context, parents routes.Parents) []routes.Gateway
	// ServiceImported says whether the cluster has a ServiceImport.
	ServiceImported(ctx context.Context, ref routes.ObjectRef) (bool, error)
}

// Decide decides what the live route must become for intent: it reads what
// the decision takes of the cluster (the argoproj-labs plugin's records,
// while the Rollout has no claim on the route), decides (package desired,
// which reads nothing), then reads what the result needs checked (the
// parents' features of what it adds, the ServiceImports it adds) and checks
// it. Every read of a decision is here; the plugin's calls and plan both
// decide through it.
func Decide(ctx context.Context, f Facts, intent desired.Intent, live routes.Route, env desired.Env) (desired.Result, error) {
	if p := env.Predecessor; p.NeedsRecords(live, env.Rollout) {
		records, err := f.PredecessorRecords(ctx, live.Namespace, p.ConfigMap)
		if err != nil {
			return desired.Result{}, routes.RouteError(live.Ref, err)
		}
		on := *p // the Rollout's routes share p (rollout.Envs): this route's records go into a copy
		on.Indexes = records.Indexes(live.Ref)
		env.Predecessor = &on
	}
	res, err := intent.Desired(live, env)
	if err != nil || res.Unchanged {
		return res, err
	}
	var facts desired.Facts
	if len(res.Needs) > 0 {
		facts.Gateways = f.Gateways(ctx, live.Parents)
	}
	for _, ref := range desired.NewImports(res, live, env) {
		exists, err := f.ServiceImported(ctx, ref)
		facts.Imports = append(facts.Imports, desired.ImportRead{Import: ref, Exists: exists, Err: err})
		if err != nil || !exists {
			break
		}
	}
	return desired.Check(res, live, env, facts)
}

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

// Decide decides what the live route must become for intent: it decides
// (desired.Decide, which reads nothing), reads what the decision asks of
// the cluster (the argoproj-labs plugin's records, while the Rollout has no
// claim on the route, then decides again with them), reads what the result
// needs checked (the parents' features of what it adds, the ServiceImports
// it adds) and checks it (desired.Check). Every read of a decision is here;
// the plugin's calls and plan both decide through it.
func Decide(ctx context.Context, f Facts, intent desired.Intent, live routes.Route, env desired.Env) (desired.Result, error) {
	d, err := desired.Decide(intent, live, env)
	if err == nil && d.NeedsRecords {
		p := *env.Predecessor // the Rollout's routes share it (rollout.Envs): this route's records go into a copy
		records, rerr := f.PredecessorRecords(ctx, live.Namespace, p.ConfigMap)
		if rerr != nil {
			return desired.Result{}, routes.RouteError(live.Ref, rerr)
		}
		p.Indexes, p.RecordsRead = records.Indexes(live.Ref), true
		env.Predecessor = &p
		d, err = desired.Decide(intent, live, env)
	}
	if err != nil || d.Unchanged {
		return d.Result, err
	}
	var facts desired.Facts
	if len(d.Needs) > 0 {
		facts.Gateways = f.Gateways(ctx, live.Parents)
	}
	for _, ref := range d.Imports {
		exists, err := f.ServiceImported(ctx, ref)
		facts.Imports = append(facts.Imports, desired.ImportRead{Import: ref, Exists: exists, Err: err})
		if err != nil || !exists {
			break
		}
	}
	return desired.Check(d.Result, live, env, facts)
}

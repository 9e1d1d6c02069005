package desired

import "github.com/gatewayapi-ssa/rollouts-plugin/routes"

// Decided is what Decide says of a route: the intent's Result, and what the
// route's cluster must be asked before the Result is checked (Check).
type Decided struct {
	Result
	// Imports are the ServiceImports the Result adds that the Rollout's
	// claim did not record: each must exist in the route's cluster, read in
	// order up to the first that does not (Facts.Imports).
	Imports []routes.ObjectRef
	// NeedsRecords says that adopting the argoproj-labs plugin's rules on
	// the route needs the records of that plugin's ConfigMap
	// (Predecessor.NeedsRecords) and env has not read them: nothing else is
	// decided until Decide is given them (Env.Predecessor with
	// RecordsRead).
	NeedsRecords bool
}

// Decide is what the live route must become for intent in env, and what
// must be read of the route's cluster before it is checked: the one entry of
// a route's decision (orchestrator.Decide reads what it asks, then calls
// Check).
func Decide(intent Intent, live routes.Route, env Env) (Decided, error) {
	if p := env.Predecessor; !p.recordsRead() && p.NeedsRecords(live, env.Rollout) {
		return Decided{NeedsRecords: true}, nil
	}
	res, err := intent.Desired(live, env)
	if err != nil || res.Unchanged {
		return Decided{Result: res}, err
	}
	return Decided{Result: res, Imports: newImports(res, live, env)}, nil
}

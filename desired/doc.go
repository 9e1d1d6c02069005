// Package desired is the plugin's pure core: for one route and one call of
// the Argo Rollouts controller, it decides what the route must become.
//
// Each kind of call is a typed value (SetWeight, SetHeader, SetMirror,
// RemoveManaged) whose Desired method takes the live route as read (rules,
// labels, annotations with the claims, managedFields) and the environment
// the call runs in (Env: the Rollout, the field manager, the conflict policy,
// the in-progress label, whether the route takes header routes) and returns a
// Result: the rules, labels and annotations to apply, or Unchanged when the
// live route already is that; the claim the route will record for the
// Rollout; and whether the plugin gives up its ownership (Release). Or it
// returns a typed error: a *ConflictError when another field manager changed
// what the plugin manages mid-rollout, a *transform.LimitError when the result
// would exceed a Gateway API limit, an *InvalidError for anything else the
// user has to fix.
//
// Nothing here does I/O, reads a clock or keeps state: the orchestrator
// (for a call, and again after an optimistic-lock conflict), the offline
// plan and a person's dry run all call the same functions and get the same
// answer for the same input.
//
// The words, used the same way everywhere: the weighted rules of a route are
// the rules whose backendRefs include both the stable and the canary Service
// (the rollout sets their weights); the added rules are the header and
// mirror rules the plugin added for a managedRoutes entry (known only by the
// names the claims record); a Rollout's routes are the routes its plugin
// config names or selects.
package desired

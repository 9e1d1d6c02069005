// Package orchestrator carries out one call of the controller on a Rollout's
// routes, and is the one place that does: it resolves the routes (kube),
// decides every route's desired state (desired), and only when every
// decision worked writes the routes that change (ssa), concurrently within
// the call's and the process's bounds, one call at a time per route. It
// chooses how each write is guarded: by field ownership where the plugin
// owns the rules alone and no other process of its field manager is there
// (Exclusion, package peers), else by the resourceVersion. After a conflict
// it reads the route again and decides again, a bounded number of times; when
// a decision says no Rollout holds anything on a route any more, it gives
// the plugin's ownership back; and it records every write's answer with the
// reader (kube.Reader.Written), so the next read of the route starts from
// it. It tells the routes' owners what each write changed and what a call
// was refused on a route (RouteEvents, given to New: package events, with
// the client of the cluster the routes are in). Verify reads the routes
// fresh and judges the gateways' status.
//
// It knows neither the RPC interface nor the Rollout's config: Run takes the
// call as package rollout made it (rollout.Call), and cleanup uses MakePlan
// and Write for its own undo. A Plan holds values only (the route read, the
// result, the intent and Env it was decided from), so a conflict decides
// again through MakePlan as the first decision did. Decide is every read a
// decision takes and the decision; package plan plans through it too.
package orchestrator

// Package plan runs a Rollout's canary steps before they run: for every
// step it makes the calls the Argo Rollouts controller would make, decides
// each route's change with the plugin's own code (the decoders of package
// decode, the core of package desired) on the routes as they are, and
// carries each step's result into the next, so a problem shows at the step
// that would hit it, not in production mid-rollout. It is the plan
// command's (package cli).
//
// It does no I/O: the cli package reads the routes and Services, checks the
// computed routes against the apiserver with server-side dry-run applies,
// and checks the plugin's permissions.
package plan

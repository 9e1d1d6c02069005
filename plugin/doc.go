// Package plugin is the traffic router Argo Rollouts talks to over RPC: it
// reads a Rollout's plugin config, finds the routes it names, asks the pure
// transforms in routes for the desired rules and hands them to ssa to write.
//
// Every method answers with an RpcError that names the Rollout and each route
// that failed; no panic crosses the RPC boundary.
package plugin

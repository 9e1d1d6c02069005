// Package plugin is the RPC adapter between Argo Rollouts and the plugin's
// core: it implements the controller's traffic router interface and nothing
// more.
//
// For each call it parses the Rollout's plugin config once (Settings),
// decodes and validates the call once into one of package desired's typed
// calls, reads what the call needs (experiment Services, the routes) under
// one deadline, asks desired what every route must become, and hands the
// results to package ssa, which writes them. Behaviour is chosen by those
// typed values, never by names or strings.
//
// Every method answers with an RpcError that names the Rollout and each route
// that failed; no panic crosses the RPC boundary.
package plugin

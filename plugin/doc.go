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
// Every method answers within its deadline (-call-timeout) with an RpcError
// that names the Rollout and each route that failed; no panic crosses the RPC
// boundary. Input to fix stops a call before any write; a fault of the
// apiserver on some routes does not keep the others from being written.
//
// The package also builds the clients (plugin.go): they share one token
// bucket and one transport (transport.go) that gives every attempt of every
// request its own timeout and retries 5xx, 429 and lost connections with
// jittered backoff inside the call's deadline. Routes worked on at once are
// bounded per call and for the whole process (concurrent.go).
package plugin

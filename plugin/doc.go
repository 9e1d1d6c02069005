// Package plugin is the RPC adapter between Argo Rollouts and the plugin's
// core: it implements the controller's traffic router interface and nothing
// more.
//
// For each call it decodes the Rollout's config and the call once (package
// decode) under one deadline and hands the result to package orchestrator,
// which reads, decides (package desired) and writes (package ssa) every
// route. Behaviour is chosen by typed values, never by names or strings.
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
// bounded per call and for the whole process (orchestrator.Bounds).
package plugin

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
// InitPlugin has main build the Backend (backend.go): each cluster's clients,
// watch caches, Leases, Events recorder and orchestrator. Every error a call
// returns is a Warning Event on the Rollout (package events), recorded with
// the client of the controller's cluster; the orchestrator tells the routes
// with the client of theirs.
package plugin

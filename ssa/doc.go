// Package ssa is the one place the plugin writes to the apiserver. It knows
// routes, not Rollouts: what to write comes decided from package desired.
//
// Every write is a server-side apply of a typed apply configuration from
// sigs.k8s.io/gateway-api/applyconfiguration, under one field manager, built
// from the live route so that every value the plugin does not change is sent
// back exactly as served (defaults included); a route the typed configuration
// cannot carry exactly is refused, not truncated. Each apply carries the
// resourceVersion it was computed from: a concurrent change by anyone turns
// into an optimistic-lock conflict, answered by a fresh read and a new
// decision, a bounded number of times. Nothing is sent when the decision is
// Unchanged. When it says Release, the plugin gives up its managedFields entry
// with one resourceVersion-guarded Update that keeps every value: the one
// write that is not an apply.
package ssa

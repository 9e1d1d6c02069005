// Package ssa is the one place the plugin writes to the apiserver.
//
// Every write is a server-side apply of a typed apply configuration from
// sigs.k8s.io/gateway-api/applyconfiguration, under one field manager, built
// from the live route so that every value the plugin does not change is sent
// back exactly as served (defaults included). Each apply carries the
// resourceVersion it was computed from: a concurrent change by anyone turns
// into an optimistic-lock conflict, answered by a fresh read and a new
// computation, a bounded number of times. Nothing is sent when the desired
// route equals the live one.
package ssa

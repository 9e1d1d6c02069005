// Package routes is the plugin's one representation of a Gateway API route:
// HTTPRoute, GRPCRoute, TCPRoute, TLSRoute and UDPRoute reduced to their
// identity, the metadata the plugin reads, and spec.rules kept exactly as the
// apiserver returned them.
//
// Keeping the rules verbatim is deliberate. spec.rules is an atomic list for
// server-side apply, so whatever the plugin applies replaces the whole list:
// every field the plugin does not manage must go back byte for byte, defaults
// included, and no Go type may silently drop a field it does not know.
//
// The package holds the pure transforms of rules (weights on the weighted
// rules, the added header and mirror rules), what a route's managedFields say
// about ownership, the claims annotation's format, and the read side: finding
// routes by name or label selector, reading them from a watch cache (one that
// fails to sync keeps retrying, and reads are GETs until it has), and
// discovering which API version of each kind the cluster serves (again after
// the apiserver stops serving it). Which
// transform a call needs, and what to record, package desired decides; it
// never writes; package ssa does.
package routes

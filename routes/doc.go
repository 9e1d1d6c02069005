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
// The package holds the model (Route, Rule, Ref, Kind and what each kind
// has), the claims annotation's format, what a route's managedFields say
// about ownership and the schema a route's CRD has (Schema). It does no
// I/O: package kube reads (and reads the apiserver's JSON into routes in one
// pass), package transform changes rules, package desired decides, package
// ssa writes.
package routes

// Package kubeclient builds the plugin's clients of one cluster (Clients):
// one token bucket for all of them, and one transport that gives every
// attempt of a request its own timeout and retries what is safe to repeat
// within the call's deadline (transport.go, with package retry's Requests).
// A request built by hand (ssa's applies, events' Events) enters here once:
// Request.Send checks its path's segments, waits for the limiter it is
// given, marks it safe to repeat if it is, and sends it straight with
// net/http (request.go). Flights lets concurrent callers share one request
// per key. A request that got no usable answer in any attempt fails with
// an error whose Reason says so (ApiserverUnavailable). The packages that send requests say a refusal
// in the same words (refusals.go): what to grant (PermissionError) and a
// resource the apiserver no longer serves (NotServed). The reading side (watch caches,
// discovery, resolving routes) is package kube.
package kubeclient

// Package kubeclient builds the plugin's clients of one cluster (Clients):
// one token bucket for all of them, and one transport that gives every
// attempt of a request its own timeout and retries what is safe to repeat
// within the call's deadline (RetryPolicy, transport.go). Flights lets
// concurrent callers share one request per key. Unanswered says a request
// got no usable answer in any attempt. The reading side (watch caches,
// discovery, resolving routes) is package kube.
package kubeclient

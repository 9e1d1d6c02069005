// Package traffic is the data plane of the end-to-end cluster: real HTTP
// requests through a real gateway (Traefik) to backends the test runs itself,
// counted by the backend that answered.
//
// Backends live in a network namespace the test creates (Netns: one veth
// pair, addresses of its own choosing): the apiserver refuses loopback
// addresses in EndpointSlices, so a backend Traefik can reach through an
// EndpointSlice needs an address that is neither loopback nor one of the
// machine's. Backends.Serve starts one HTTP server per Service, listening only
// inside that namespace and answering with the Service's name in the
// X-Backend header, and writes the EndpointSlice that makes it the Service's
// only endpoint.
//
// A Meter sends a bounded number of requests to the gateway's entrypoint on
// 127.0.0.1 (never anywhere else) and counts the answers (Counts); Converge
// repeats that until the split matches the route's weights and says when the
// traffic moved; a Sampler records every answer with its time, so a test can
// ask what the gateway carried right after a given moment (SplitAfter,
// MovedAt). The comparisons are pure functions (split.go).
package traffic

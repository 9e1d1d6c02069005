// Package ssa sends the plugin's writes to the apiserver. It knows routes
// and what to write to them (Content), not Rollouts and not decisions: what to
// write comes decided, and package orchestrator, the one caller that writes,
// decides again after a conflict and records each answer for later reads.
//
// Every write is a server-side apply of a typed apply configuration from
// sigs.k8s.io/gateway-api/applyconfiguration, under one field manager, built
// from the live route so that every value the plugin does not change is sent
// back exactly as served (defaults included). Where the configuration's
// types vouch that they carry the object exactly, its JSON is written
// straight from the object, as the configuration would encode it, without
// filling the types (shape.go), and sent with net/http through the REST
// client's own http.Client and token bucket, past client-go's rest.Request
// (send.go). Both re-implement a part of client-go's path because they
// measurably cost less: sending through rest.Request, and filling and
// encoding the typed configuration, each made the plugin execute more
// instructions per route written (docs/performance/cpu-per-route.md has the
// counts and how to take them). A route whose rules the typed
// configuration cannot carry exactly (a field of a newer Gateway API) is
// applied unstructured instead: the same object, field manager, options and
// guard, never truncated, and the log line says why. An apply is guarded
// (Guard) by the resourceVersion it was computed from, and forced (a
// concurrent change by anyone is an optimistic-lock conflict, IsStale), or,
// where the plugin owns spec.rules alone, by field ownership: not forced, no
// resourceVersion, so that only another manager's change of the rules stops
// it (IsOwnershipConflict). The orchestrator chooses the guard, and answers a
// conflict with a new read and a new decision. Release gives up the
// plugin's managedFields entry with one JSON patch that tests the entry is
// as read and keeps every value: the one write that is not an apply. Before
// a write that starts or ends its ownership of a route, access reviews
// (ReviewOwnershipChange) check that the plugin may patch and get it, so a
// rollout never stops half-way for want of a permission. Which guard a write
// takes, and why: docs/reliability.md#what-guards-a-write.
//
// Timeouts and retries of the requests themselves (5xx, 429, lost
// connections) are the transport's, below every client (package kubeclient);
// they are safe for every write of the plugin: one carrying a
// resourceVersion conflicts once applied, one not forced changes nothing
// when applied again, and the release's test fails once it is applied.
package ssa

// Package events tells people what the plugin did and what it refused, where
// they look: Kubernetes Events (events.k8s.io/v1), which kubectl describe and
// kubectl get events show.
//
// On the Rollout (Rollouts, one per process, with the client of the
// controller's cluster): a Warning for every error a call returns, its reason
// naming the kind of error (Reason) and its note the call's own text; and a
// Normal Event, once, when a call that failed succeeds again. On each route
// the plugin writes (Routes, one per cluster the routes are in): a Normal
// Event per kind of change a write made, naming the Rollout and the call,
// and a Warning when a call is refused on the route.
//
// A Recorder sends them, and it is built so that no call waits for it: a call
// hands it an Event, which never blocks (a full queue drops it), and one
// goroutine per Recorder sends, with its own token bucket (not the calls'),
// one request at a time with a timeout. The same Event again (the same
// object, type, reason and note) is a series: it raises the count of the
// Event already sent, at most once every few seconds, instead of adding one;
// a Warning with a new text is a new Event only a few times a minute per
// object and reason, after which it counts in the newest one. Without
// permission to create Events the Recorder says so once in the log and goes
// on without them, trying again now and then.
//
// Why not client-go's tools/events, which records Events too: its
// broadcaster takes two Events that differ only in their note for the same
// one, so a route's change in the next step of a walk would only raise the
// count of the first step's Event, and the next step's weights would be
// told nowhere; and while the Events API is slow it holds a goroutine for
// every Event on its way, each retrying on its own, where a step over many
// routes records one per route. clientgo_test.go runs both on client-go
// itself, so that a client-go that changes either fails there.
package events

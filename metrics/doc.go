// Package metrics serves the plugin's Prometheus metrics on /metrics
// (-metrics-address): what the calls of the Argo Rollouts controller came
// to and how long they took, what came of the route writes, the requests
// sent to each apiserver, what the watch caches hold, the Events recorded
// and dropped, and the plugin's other processes seen.
//
// The packages that do the work keep plain counters and snapshots of
// bounded keys (kubeclient.Requests, orchestrator.Writes, kube.Held,
// events.(*Recorder).Recorded, peers.(*Peers).Others); this package turns
// them into metrics when Prometheus scrapes (collector.go), so the call
// path pays an atomic add, not a label lookup. The one thing observed here
// is the calls themselves: the plugin hands each one to Call.
//
// No label takes its value from a Rollout or a route: the method is one of
// the controller's, the result an Event reason (events.Reason), the verb
// and code the apiserver's, the route cluster one the platform team named
// with -route-cluster ("" for the controller's own). A Rollout naming a
// thousand routes adds no series.
package metrics

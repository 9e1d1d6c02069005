// Package peers lets the plugin processes that write routes as one field
// manager in one cluster know of each other, through a Lease each keeps in
// one namespace.
//
// Field ownership tells the plugin when another manager changed the rules
// it writes: spec.rules is one atomic field, so such a change takes the
// plugin's ownership away and the plugin's next apply, sent without a
// resourceVersion and not forced, conflicts. That guard lets writes through
// while others change only labels, annotations or hostnames, which a
// resourceVersion precondition would not. It cannot see a change by another
// process of the same field manager (two Argo Rollouts controllers sharded
// by --instance-id, the old and the new controller pod of a rolling update,
// a person's cleanup): server-side apply sees one manager. So a process
// writes guarded by ownership alone only while it knows it is the only one
// (Peers.Enter says so); otherwise every write carries the resourceVersion.
//
// The protocol: every process keeps a Lease (renewed every third of
// LeaseDuration) whose annotation lists the other processes it has
// acknowledged. A process acknowledges another only after it has stopped
// writing without a resourceVersion and every such write in flight has
// ended. A process writes nothing until every other live process has
// acknowledged it, and nothing once its own Lease has gone unrenewed for two
// thirds of LeaseDuration, before the others take it for gone. A process is
// live while its Lease keeps changing, as this process sees it (no clocks
// are compared). A process that cannot keep a Lease (no namespace, no
// permission) writes with the resourceVersion always and says so once.
package peers

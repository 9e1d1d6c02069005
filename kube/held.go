package kube

// Held is what a Cluster holds at a moment, for people watching the plugin
// (package metrics): what its memory and its watches on the apiserver grow
// with.
type Held struct {
	// RouteCaches, ParentCaches and GrantCaches are the watch caches
	// running: of the routes of one kind in one namespace; of
	// GatewayClasses, Gateways and ListenerSets; of ReferenceGrants in one
	// namespace. Each holds one watch open on the apiserver.
	RouteCaches, ParentCaches, GrantCaches int
	// WholeRoutes are the routes a call has read, which their watch caches
	// keep whole (of the others only the identity and labels), until their
	// cache stops; at most maxReadByCalls.
	WholeRoutes int
	// MissingRoutes are the named routes remembered as missing for a
	// moment (missingFor), so repeated calls do not read them each time;
	// at most maxMissing.
	MissingRoutes int
	// PredecessorReads are the argoproj-labs plugin's ConfigMaps whose
	// reads are remembered (predecessorFor); at most maxPredecessors.
	PredecessorReads int
}

// Held says what the Cluster holds now. It counts under the Cluster's lock
// and copies nothing: cheap enough for every scrape.
func (c *Cluster) Held() Held {
	c.mu.Lock()
	defer c.mu.Unlock()
	h := Held{RouteCaches: len(c.informers), WholeRoutes: c.readByCalls.len(),
		MissingRoutes: c.missing.len(), PredecessorReads: c.predecessors.len()}
	for key := range c.parents {
		if key.gvr.Resource == "referencegrants" {
			h.GrantCaches++
		} else {
			h.ParentCaches++
		}
	}
	return h
}

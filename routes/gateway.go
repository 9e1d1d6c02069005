package routes

import "fmt"

// Gateway is one parent of a route as far as what it carries goes: the
// GatewayClass behind it (of the Gateway, or of the Gateway a ListenerSet
// belongs to) and the features that class publishes.
type Gateway struct {
	Parent ParentRef
	// Class is the GatewayClass's name; "" when it is not known.
	Class string
	// Features is the class's status.supportedFeatures. Publishes says the
	// class lists any: a class that lists none (a gateway older than Gateway
	// API v1.4, or one that does not fill it) tells nothing.
	Features  []string
	Publishes bool
	// Unknown says why nothing is known of the parent's features (a Service
	// parent, a Gateway that is not there, reading it refused); "" when
	// Class is known.
	Unknown string
}

func (g Gateway) String() string {
	if g.Class == "" {
		return "parent " + g.Parent.String()
	}
	return fmt.Sprintf("GatewayClass %s (of parent %s)", g.Class, g.Parent)
}

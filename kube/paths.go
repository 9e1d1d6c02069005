package kube

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
)

// Every path kube sends a request to is built here, from a root the plugin
// fixes ("/apis", "/api/v1") and segments that are each checked
// (kubeclient.CheckPathSegments) before any request: client-go's AbsPath
// joins them with path.Join, which would resolve a ".." in a name.

// objectPath is root followed by segments, for AbsPath; an error says
// which segment is no name.
func objectPath(root string, segments ...string) ([]string, error) {
	if err := kubeclient.CheckPathSegments(segments...); err != nil {
		return nil, err
	}
	p := make([]string, 0, len(segments)+1)
	return append(append(p, root), segments...), nil
}

// resourcePath is the path of the object name of a resource in namespace
// ("": a cluster-scoped resource), or of all its objects there (name "").
func resourcePath(gvr schema.GroupVersionResource, namespace, name string) ([]string, error) {
	switch {
	case namespace == "" && name == "":
		return objectPath("/apis", gvr.Group, gvr.Version, gvr.Resource)
	case namespace == "":
		return objectPath("/apis", gvr.Group, gvr.Version, gvr.Resource, name)
	case name == "":
		return objectPath("/apis", gvr.Group, gvr.Version, "namespaces", namespace, gvr.Resource)
	}
	return objectPath("/apis", gvr.Group, gvr.Version, "namespaces", namespace, gvr.Resource, name)
}

// errNoName is the error of a read of an object whose name is empty.
var errNoName = errors.New("the object has no name")

// objectID names an object a GET asks for, or the one its answer is.
type objectID struct{ kind, namespace, name string }

func (o objectID) String() string {
	kind := o.kind
	if kind == "" {
		kind = "an object without a kind"
	}
	if o.namespace == "" {
		return kind + " " + o.name
	}
	return kind + " " + o.namespace + "/" + o.name
}

// answerIs refuses the answer got to a GET of asked unless it is that
// object: the same namespace and name, and the same kind where the answer
// carries one. Nothing of another object is used or quoted.
func answerIs(asked, got objectID) error {
	if (got.kind == "" || got.kind == asked.kind) && got.namespace == asked.namespace && got.name == asked.name {
		return nil
	}
	return wrongAnswer(asked, got)
}

// wrongAnswer says that the apiserver answered a GET of asked with another
// object.
func wrongAnswer(asked, got fmt.Stringer) error {
	return fmt.Errorf("asked for %s, the apiserver answered with %s: the answer is refused, and nothing of it is used", asked, got)
}

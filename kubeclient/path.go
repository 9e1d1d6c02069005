package kubeclient

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

// CheckPathSegments says whether each of segments can be one segment of a
// request's path: not empty, not "." or "..", and holding no "/" or "%",
// so that a name taken from a Rollout or a route names one object and never
// climbs to another path. Every request path the plugin builds from names
// passes here before it is sent (kube's objectPath; Request.Send, which
// sends ssa's applies and events' Events).
func CheckPathSegments(segments ...string) error {
	for _, s := range segments {
		if s == "" {
			return fmt.Errorf("refusing a request whose path has an empty segment (a missing name): %q", strings.Join(segments, "/"))
		}
		if why := content.IsPathSegmentName(s); len(why) > 0 {
			return fmt.Errorf("refusing a request whose path segment %q is no name (%s)", s, strings.Join(why, "; "))
		}
	}
	return nil
}

package events

import (
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A route's apiVersion is its group and version, a constant (no copy kept
// per Event) for every version the plugin serves.
func TestAPIVersion(t *testing.T) {
	for _, k := range routes.Kinds {
		for _, v := range k.Versions() {
			if got, want := apiVersion(v), routes.Group+"/"+v; got != want {
				t.Errorf("apiVersion(%q) = %q; want %q", v, got, want)
			}
			if n := testing.AllocsPerRun(10, func() { _ = apiVersion(v) }); n != 0 {
				t.Errorf("apiVersion(%q) allocates %v times", v, n)
			}
		}
	}
	if got := apiVersion("v9"); got != routes.Group+"/v9" {
		t.Errorf("apiVersion(v9) = %q", got)
	}
}

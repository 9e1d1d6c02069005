package plugin

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// perRoute keeps each route's error in its place, turns a panic into that
// route's error, and never runs more than limit at once.
func TestPerRoute(t *testing.T) {
	refs := []routes.Ref{{Kind: routes.HTTPRoute, Namespace: "ns", Name: "a"}, {Kind: routes.HTTPRoute, Namespace: "ns", Name: "b"}, {Kind: routes.HTTPRoute, Namespace: "ns", Name: "c"}}
	var running, most atomic.Int32
	errs := perRoute(refs, 2, func(i int) error {
		n := running.Add(1)
		defer running.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		switch i {
		case 1:
			panic("boom")
		case 2:
			return errors.New("refused")
		}
		return nil
	})
	if errs[0] != nil || errs[2] == nil || errs[2].Error() != "refused" {
		t.Errorf("errors out of place: %v", errs)
	}
	if errs[1] == nil || !strings.Contains(errs[1].Error(), "HTTPRoute ns/b: internal error: boom") {
		t.Errorf("panic not turned into the route's error: %v", errs[1])
	}
	if m := most.Load(); m > 2 {
		t.Errorf("%d ran at once, limit 2", m)
	}
	if got := failures(errs); len(got) != 2 {
		t.Errorf("failures = %v", got)
	}
}

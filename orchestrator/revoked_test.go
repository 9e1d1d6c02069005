package orchestrator

import (
	"fmt"
	"testing"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A tenant naming ever more routes cannot grow the memory of claims past its
// bound: the oldest pair goes first, and a claim that ended is forgotten.
func TestTheClaimMemoryIsBounded(t *testing.T) {
	var m claimMemory
	ref := func(i int) routes.Ref {
		return routes.Ref{Kind: routes.HTTPRoute, Namespace: "shared", Name: fmt.Sprintf("r%d", i)}
	}
	for i := range maxClaimMemory + 10 {
		m.note("shop/demo", ref(i), true)
	}
	if len(m.seen) != maxClaimMemory {
		t.Fatalf("remembers %d pairs, want the bound %d", len(m.seen), maxClaimMemory)
	}
	for i := range 10 {
		if m.has("shop/demo", ref(i)) {
			t.Errorf("%s, among the oldest, is still remembered", ref(i))
		}
	}
	if !m.has("shop/demo", ref(maxClaimMemory+9)) || m.has("other/demo", ref(maxClaimMemory+9)) {
		t.Error("the newest pair is not remembered for its Rollout alone")
	}
	m.note("shop/demo", ref(maxClaimMemory+9), false)
	if m.has("shop/demo", ref(maxClaimMemory+9)) {
		t.Error("a claim that ended is still remembered")
	}
}

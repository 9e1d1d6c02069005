package events

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
)

// The calls of the tests, on the Rollout shop/web.
var (
	webRollout    = rollout.Rollout{Namespace: "shop", Name: "web", UID: "uid-web"}
	setWeight30   = rollout.Call{Rollout: webRollout, Label: rollout.Label{Method: rollout.SetWeight, Weight: 30}}
	removeManaged = rollout.Call{Rollout: webRollout, Label: rollout.Label{Method: rollout.RemoveManagedRoutes}}
)

// A call that fails is a Warning each time; the first call of the same
// method that succeeds after it says so, once; another method's success
// does not.
func TestACallThatSucceedsAgainSaysSoOnce(t *testing.T) {
	r := newRecorder(newAPI(), Options{}, nil)
	ro := NewRollouts(r)
	bad := &rollout.ConfigError{Err: errors.New(`unknown key "httpRout"`)}
	text := `rollout shop/web: SetWeight(30): unknown key "httpRout"`
	ro.Succeeded(setWeight30) // nothing failed: nothing to say
	for range 3 {
		ro.Failed(setWeight30, text, bad)
		ro.Succeeded(removeManaged)
	}
	ro.Succeeded(setWeight30)
	ro.Succeeded(setWeight30)
	var got []string
	for _, e := range drain(r) {
		got = append(got, e.Type+" "+e.Reason+" "+e.Action+": "+e.Note)
	}
	for i, g := range got { // the time the failures began varies
		if before, _, ok := strings.Cut(g, " since "); ok {
			got[i] = before
		}
	}
	want := []string{
		"Warning InvalidConfig SetWeight: " + text,
		"Warning InvalidConfig SetWeight: " + text,
		"Warning InvalidConfig SetWeight: " + text,
		"Normal Recovered SetWeight: rollout shop/web: SetWeight(30): succeeded after 3 failed SetWeight calls",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	var none *Rollouts
	none.Failed(setWeight30, text, bad) // a plugin without clients records nothing
}

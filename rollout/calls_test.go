package rollout

import (
	"strings"
	"testing"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	"github.com/google/go-cmp/cmp"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// SetWeight and VerifyWeight validate their split with the same function, so
// they refuse the same inputs with the same words.
func TestValidateSplit(t *testing.T) {
	max := int32(1000)
	withMax := func(ro *v1alpha1.Rollout) { ro.Spec.Strategy.Canary.TrafficRouting.MaxTrafficWeight = &max }
	pingPong := func(ro *v1alpha1.Rollout) {
		ro.Spec.Strategy.Canary.PingPong = &v1alpha1.PingPongSpec{PingService: "web-ping", PongService: "web-pong"}
		ro.Status.Canary.StablePingPong = v1alpha1.PPPong
	}
	dest := func(name string, w int32) v1alpha1.WeightDestination {
		return v1alpha1.WeightDestination{ServiceName: name, Weight: w}
	}
	for _, tc := range []struct {
		name       string
		edit       func(*v1alpha1.Rollout)
		weight     int32
		additional []v1alpha1.WeightDestination
		want       transform.Split
		err        string
	}{
		{name: "canary and stable", weight: 30,
			want: transform.Split{Stable: routes.ServiceRef("shop", "web-stable"), Canary: routes.ServiceRef("shop", "web-canary"), CanaryWeight: 30, MaxWeight: 100}},
		{name: "experiment weights are reserved", weight: 20, additional: []v1alpha1.WeightDestination{dest("base", 5), dest("exp", 25)},
			want: transform.Split{Stable: routes.ServiceRef("shop", "web-stable"), Canary: routes.ServiceRef("shop", "web-canary"), CanaryWeight: 20, MaxWeight: 100, Reserved: 30}},
		{name: "maxTrafficWeight", edit: withMax, weight: 300,
			want: transform.Split{Stable: routes.ServiceRef("shop", "web-stable"), Canary: routes.ServiceRef("shop", "web-canary"), CanaryWeight: 300, MaxWeight: 1000}},
		{name: "ping-pong: pong is stable", edit: pingPong, weight: 10,
			want: transform.Split{Stable: routes.ServiceRef("shop", "web-pong"), Canary: routes.ServiceRef("shop", "web-ping"), CanaryWeight: 10, MaxWeight: 100}},
		{name: "over the maximum", weight: 101, err: "weight 101 is outside 0..100"},
		{name: "negative", weight: -1, err: "weight -1 is outside 0..100"},
		{name: "experiment Service without a name", weight: 0, additional: []v1alpha1.WeightDestination{dest("", 5)}, err: "no Service name"},
		{name: "negative experiment weight", weight: 0, additional: []v1alpha1.WeightDestination{dest("exp", -5)}, err: "experiment Service exp has negative weight -5"},
		{name: "experiment Service twice", weight: 0, additional: []v1alpha1.WeightDestination{dest("exp", 5), dest("exp", 5)}, err: "listed twice"},
		{name: "no room left for stable", weight: 80, additional: []v1alpha1.WeightDestination{dest("exp", 25)},
			err: "canary weight 80 plus experiment weights 25 exceed maxTrafficWeight 100"},
		{name: "no canary Service", edit: func(ro *v1alpha1.Rollout) { ro.Spec.Strategy.Canary.CanaryService = "" }, weight: 10, err: "canaryService"},
		{name: "maxTrafficWeight 0", edit: func(ro *v1alpha1.Rollout) { ro.Spec.Strategy.Canary.TrafficRouting.MaxTrafficWeight = new(int32) }, weight: 0,
			err: "maxTrafficWeight 0 is outside 1..1000000"},
		{name: "maxTrafficWeight past Gateway API's largest weight", edit: func(ro *v1alpha1.Rollout) {
			m := int32(2_000_000)
			ro.Spec.Strategy.Canary.TrafficRouting.MaxTrafficWeight = &m
		}, weight: 10, err: "maxTrafficWeight 2000000 is outside 1..1000000"},
		{name: "no trafficRouting", edit: func(ro *v1alpha1.Rollout) { ro.Spec.Strategy.Canary.TrafficRouting = nil }, weight: 10,
			err: "spec.strategy.canary.trafficRouting is not set"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ro := cfgRollout(DefaultPluginName, `{"httpRoute": "web"}`)
			if tc.edit != nil {
				tc.edit(ro)
			}
			got, err := validateSplit(ro, tc.weight, tc.additional)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one mentioning %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("split (-want +got):\n%s", diff)
			}
		})
	}
}

// validateSplit reports the first fault in this order, each in its own
// words: a canary weight outside 0..maxTrafficWeight, as Check says it; the
// first wrong additionalDestinations entry, even when the entries before it
// already exceed maxTrafficWeight; then weights that exceed it, saying
// nothing was written.
func TestValidateSplitSaysTheFirstFault(t *testing.T) {
	dest := func(name string, w int32) v1alpha1.WeightDestination {
		return v1alpha1.WeightDestination{ServiceName: name, Weight: w}
	}
	for _, tc := range []struct {
		name       string
		weight     int32
		additional []v1alpha1.WeightDestination
		err        string
	}{
		{name: "canary weight over the maximum, an entry without a name", weight: 101, additional: []v1alpha1.WeightDestination{dest("", 5)},
			err: "weight 101 is outside 0..100 (spec.strategy.canary.trafficRouting.maxTrafficWeight)"},
		{name: "negative canary weight, entries that exceed", weight: -1, additional: []v1alpha1.WeightDestination{dest("exp", 200)},
			err: "weight -1 is outside 0..100 (spec.strategy.canary.trafficRouting.maxTrafficWeight)"},
		{name: "entries that exceed, then one listed twice", weight: 80, additional: []v1alpha1.WeightDestination{dest("exp", 25), dest("exp", 5)},
			err: "experiment Service exp is listed twice in additionalDestinations"},
		{name: "entries that exceed, then a negative one", weight: 80, additional: []v1alpha1.WeightDestination{dest("a", 25), dest("b", -5)},
			err: "experiment Service b has negative weight -5"},
		{name: "the first wrong entry", weight: 10, additional: []v1alpha1.WeightDestination{dest("a", 5), dest("B", 5), dest("", 5)},
			err: `additionalDestinations: experiment Service "B" is not a Service name (a DNS-1123 label): ` + notALabel("B")},
		{name: "entries that exceed", weight: 80, additional: []v1alpha1.WeightDestination{dest("a", 15), dest("b", 10)},
			err: "canary weight 80 plus experiment weights 25 exceed maxTrafficWeight 100; nothing was written"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := validateSplit(cfgRollout(DefaultPluginName, `{"httpRoute": "web"}`), tc.weight, tc.additional)
			if err == nil || err.Error() != tc.err {
				t.Fatalf("error %v, want %q", err, tc.err)
			}
		})
	}
}

// The controller's matches arrive in the core as they were sent.
func TestHeaderAndMirrorCallsCarryTheMatches(t *testing.T) {
	ro := cfgRollout(DefaultPluginName, `{"httpRoute": "web"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}, {Name: "mirror"}}
	services := transform.RolloutServices{Stable: routes.ServiceRef("shop", "web-stable"), Canary: routes.ServiceRef("shop", "web-canary"), ManagedRoutes: []string{"beta", "mirror"}}

	s := mustParse(t, ro)
	h, err := setHeader(ro, &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{
		{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Prefix: "yes"}},
	}}, &s)
	if err != nil {
		t.Fatal(err)
	}
	wantH := desired.SetHeader{Name: "beta", Rules: services, Match: []transform.HeaderMatch{{Name: "X-Canary", Value: &transform.StringMatch{Prefix: "yes"}}}}
	if diff := cmp.Diff(wantH, h); diff != "" {
		t.Errorf("header call (-want +got):\n%s", diff)
	}

	pct := int32(25)
	m, err := setMirror(ro, &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: &pct, Match: []v1alpha1.RouteMatch{{
		Method:  &v1alpha1.StringMatch{Exact: "GET"},
		Path:    &v1alpha1.StringMatch{Prefix: "/api"},
		Headers: map[string]v1alpha1.StringMatch{"x-tenant": {Regex: "a|b"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	wantM := desired.SetMirror{Name: "mirror", Percent: &pct, Rules: services, Match: []transform.RequestMatch{{
		Method:  &transform.StringMatch{Exact: "GET"},
		Path:    &transform.StringMatch{Prefix: "/api"},
		Headers: map[string]transform.StringMatch{"x-tenant": {Regex: "a|b"}},
	}}}
	if diff := cmp.Diff(wantM, m); diff != "" {
		t.Errorf("mirror call (-want +got):\n%s", diff)
	}
}

// A header step that adds rules needs a route that takes them; one that
// removes needs nothing.
func TestHeaderCallNeedsARouteThatTakesHeaderRoutes(t *testing.T) {
	ro := cfgRollout(DefaultPluginName, `{"httpRoutes": [{"name": "web"}]}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "beta"}}
	add := &v1alpha1.SetHeaderRoute{Name: "beta", Match: []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}}
	s := mustParse(t, ro)
	if _, err := setHeader(ro, add, &s); err == nil || !strings.Contains(err.Error(), "takes header routes") {
		t.Errorf("error %v, want one saying no route takes header routes", err)
	}
	if _, err := setHeader(ro, &v1alpha1.SetHeaderRoute{Name: "beta"}, &s); err != nil {
		t.Errorf("removal: %v", err)
	}
	if _, err := setHeader(ro, &v1alpha1.SetHeaderRoute{}, &s); err == nil || !strings.Contains(err.Error(), "the setHeaderRoute step has no name") {
		t.Errorf("error %v, want one saying the step has no name", err)
	}
}

func mustParse(t *testing.T, ro *v1alpha1.Rollout) Settings {
	t.Helper()
	s, err := ParseConfig(ro, DefaultPluginName)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// While a Rollout is aborted or promoted in full, the controller removes
// the managed routes and then repeats the current step's header or mirror
// call: that call does nothing (even a step that could not be carried out),
// so the abort's SetWeight follows. The config is still read first.
func TestHeaderAndMirrorCallsDoNothingWhileTheRolloutEnds(t *testing.T) {
	ro := cfgRollout(DefaultPluginName, `{"httpRoute": "web"}`)
	ro.Spec.Strategy.Canary.TrafficRouting.ManagedRoutes = []v1alpha1.MangedRoutes{{Name: "mirror"}}
	pct := int32(250) // refused, were it carried out
	process := Process{PluginName: DefaultPluginName}
	mirror := Label{Method: SetMirrorRoute, Mirror: &v1alpha1.SetMirrorRoute{Name: "mirror", Percentage: &pct,
		Match: []v1alpha1.RouteMatch{{Path: &v1alpha1.StringMatch{Prefix: "/"}}}}}
	header := Label{Method: SetHeaderRoute, Header: &v1alpha1.SetHeaderRoute{Name: "mirror"}}
	if _, err := Decode(process, ro, mirror); err == nil {
		t.Fatal("a mirror step of 250% decoded while the Rollout progresses")
	}
	for _, end := range []struct {
		name string
		set  func(*v1alpha1.Rollout)
		say  string
	}{
		{"aborted", func(r *v1alpha1.Rollout) { r.Status.Abort = true }, "the Rollout is aborted"},
		{"promoted in full", func(r *v1alpha1.Rollout) { r.Status.PromoteFull = true }, "the Rollout is promoted in full"},
	} {
		r := ro.DeepCopy()
		end.set(r)
		for _, req := range []Label{mirror, header} {
			c, err := Decode(process, r, req)
			if err != nil || c.Intent != nil || !strings.HasPrefix(c.Skip, end.say) {
				t.Errorf("%s, %s: err %v, Intent %v, Skip %q; want nothing to do because %s", end.name, req, err, c.Intent, c.Skip, end.say)
			}
		}
		if c, err := Decode(process, r, Label{Method: SetWeight}); err != nil || c.Skip != "" || c.Intent == nil {
			t.Errorf("%s: SetWeight(0) must still be carried out: err %v, skip %q", end.name, err, c.Skip)
		}
		bad := r.DeepCopy()
		bad.Spec.Strategy.Canary.TrafficRouting.Plugins[DefaultPluginName] = []byte(`{"httpRoute": 1}`)
		if _, err := Decode(process, bad, mirror); err == nil {
			t.Errorf("%s: a bad config is not reported", end.name)
		}
	}
}

// Decode names the call for the logs (Call.Name, the label's String) on
// every way out: a call decoded, a config it cannot read, a step it refuses.
func TestADecodedCallIsNamedForTheLogsEvenWhenItFails(t *testing.T) {
	process := Process{PluginName: DefaultPluginName}
	good := cfgRollout(DefaultPluginName, `{"httpRoute": "web"}`)
	badConfig := cfgRollout(DefaultPluginName, `{"httpRoute": 1}`)
	for _, tc := range []struct {
		name    string
		ro      *v1alpha1.Rollout
		label   Label
		want    string
		decoded bool
	}{
		{"decoded", good, Label{Method: SetWeight, Weight: 20}, "SetWeight(20)", true},
		{"a config it cannot read", badConfig, Label{Method: SetWeight, Weight: 20}, "SetWeight(20)", false},
		{"a step it refuses", good, Label{Method: SetHeaderRoute}, "SetHeaderRoute", false},
	} {
		c, err := Decode(process, tc.ro, tc.label)
		if (err == nil) != tc.decoded {
			t.Errorf("%s: error %v", tc.name, err)
		}
		if c.Name != tc.want || c.Name != tc.label.String() {
			t.Errorf("%s: named %q, want %q", tc.name, c.Name, tc.want)
		}
	}
}

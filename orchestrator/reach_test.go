package orchestrator

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/ssa"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

// answeringReader answers every Get with get and every List with list,
// whatever was asked: an apiserver, or a cache, that returns another route.
type answeringReader struct {
	kube.Reader // nil: nothing else may be read
	get         routes.Route
	list        []routes.Route
}

func (r *answeringReader) Get(context.Context, routes.Ref) (routes.Route, error) { return r.get, nil }

func (r *answeringReader) List(context.Context, routes.Kind, string, labels.Selector) ([]routes.Route, error) {
	return r.list, nil
}

// The reach of a Rollout is checked for the namespaces its config names; a
// route the reader returns from elsewhere (asked for shop/web, given
// other/web; a selector of shop that finds a route of other) is refused
// before any decision, naming it, and nothing is read further or written.
func TestARouteReturnedFromOutsideTheReachIsRefused(t *testing.T) {
	route := func(ns, name string) routes.Route {
		return routes.Route{Ref: routes.Ref{Kind: routes.HTTPRoute, Namespace: ns, Name: name}, Version: "v1"}
	}
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	for _, tc := range []struct {
		name    string
		targets routes.Targets
		reader  *answeringReader
		want    string
	}{
		{name: "a named route", targets: routes.Targets{Named: []routes.Ref{web}}, reader: &answeringReader{get: route("other", "web")},
			want: "nothing was written: HTTPRoute other/web was returned for the Rollout's routes and is none of them: its reach was never checked, and nothing of it is used"},
		{name: "another name", targets: routes.Targets{Named: []routes.Ref{web}}, reader: &answeringReader{get: route("shop", "db")},
			want: "nothing was written: HTTPRoute shop/db was returned for the Rollout's routes and is none of them: its reach was never checked, and nothing of it is used"},
		{name: "a selected route", targets: routes.Targets{Selectors: []routes.Selection{{Kind: routes.HTTPRoute, Namespace: "shop", Selector: sel}}},
			reader: &answeringReader{list: []routes.Route{route("shop", "web"), route("other", "web")}},
			want:   "nothing was written: HTTPRoute other/web was returned for the Rollout's routes and is none of them: its reach was never checked, and nothing of it is used"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := New(tc.reader, ssa.NewWriter(nil, nil, fieldManager, logrus.NewEntry(logrus.New())), nil, nil, logrus.NewEntry(logrus.New()), Bounds{WritesPerCall: 1})
			c := rollout.Call{Rollout: rollout.Rollout{Namespace: "shop", Name: "web"}, Settings: rollout.Settings{Targets: tc.targets},
				Intent: desired.SetWeight{Split: transform.Split{Stable: routes.ServiceRef("shop", "web-stable"), Canary: routes.ServiceRef("shop", "web-canary"), CanaryWeight: 30, MaxWeight: 100}}}
			err := o.Run(context.Background(), c)
			got := "no error"
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			// VerifyWeight reads the routes it resolved again: never one outside.
			_, err = o.Verify(context.Background(), c)
			got = "no error"
			if err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(strings.TrimPrefix(tc.want, "nothing was written: "), got); diff != "" {
				t.Errorf("VerifyWeight's error (-want +got):\n%s", diff)
			}
		})
	}
}

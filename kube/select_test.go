package kube

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// listed is a RouteReader whose every selector matches n routes of its
// kind, named after the selector; it counts the Lists.
type listed struct {
	n     int
	lists int
}

func (l *listed) Get(_ context.Context, ref routes.Ref) (routes.Route, error) {
	return routes.Route{Ref: ref}, nil
}

func (l *listed) List(_ context.Context, kind routes.Kind, namespace string, selector labels.Selector) ([]routes.Route, error) {
	l.lists++
	out := make([]routes.Route, l.n)
	for i := range out {
		out[i].Ref = routes.Ref{Kind: kind, Namespace: namespace, Name: fmt.Sprintf("%s-%d", selector, i)}
	}
	return out, nil
}

func selection(kind routes.Kind, app string) routes.Selection {
	return routes.Selection{Kind: kind, Namespace: wtNS, Selector: labels.SelectorFromSet(labels.Set{"app": app})}
}

// A call works on at most maxRoutesPerCall routes, named and selected
// together: the selector that takes it past is refused, naming its key and
// what it matched, and no selector after it is read.
func TestACallWorksOnAtMostTheBoundOfRoutes(t *testing.T) {
	ctx := context.Background()
	named := routes.Targets{Named: []routes.Ref{named("front")}}
	fits := &listed{n: maxRoutesPerCall - 1}
	res := ResolveEach(ctx, fits, routes.Targets{Named: named.Named, Selectors: []routes.Selection{selection(routes.HTTPRoute, "web")}})
	if res.Err() != nil || len(res.Routes) != maxRoutesPerCall {
		t.Fatalf("%d routes: %d read, %v; want them all", maxRoutesPerCall, len(res.Routes), res.Err())
	}

	past := &listed{n: 600}
	res = ResolveEach(ctx, past, routes.Targets{Named: named.Named, Selectors: []routes.Selection{
		selection(routes.HTTPRoute, "web"), selection(routes.GRPCRoute, "api"), selection(routes.TCPRoute, "db"),
	}})
	var tooMany *TooManyRoutesError
	if !errors.As(res.Err(), &tooMany) {
		t.Fatalf("1,201 routes: %v; want a *TooManyRoutesError", res.Err())
	}
	for _, want := range []string{`key "grpcRouteSelector": GRPCRoute selector "app=api" in namespace shop matches 600 routes, which takes the call to 1201`, "at most 1000 routes"} {
		if !strings.Contains(tooMany.Error(), want) {
			t.Errorf("the error %q does not say %q", tooMany, want)
		}
	}
	if past.lists != 2 {
		t.Errorf("%d selectors listed; want 2, none after the one past the bound", past.lists)
	}
}

package events

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/desired"
	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/rollout"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/gatewayapi-ssa/rollouts-plugin/transform"
)

var web = routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: "web"}

// reasonWeightsChanged is the reason of a change of weights
// (routes.WeightChanged): the Events of most tests.
const reasonWeightsChanged = "WeightsChanged"

// Every kind of error the code has gets its reason, wrapped as the
// orchestrator and the plugin wrap it; an error about several routes takes
// the first reason of the list.
func TestReasonOfEachError(t *testing.T) {
	about := func(err error) error { return fmt.Errorf("nothing was written: %w", routes.RouteError(web, err)) }
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&rollout.ConfigError{Err: errors.New(`unknown key "httpRout"`)}, "InvalidConfig"},
		{&rollout.ClusterError{Cluster: "fleet"}, "InvalidConfig"},
		{&rollout.StepError{Err: &desired.InvalidError{Err: errors.New("bad regex")}}, "InvalidStep"},
		{about(&kubeclient.PermissionError{Verbs: []string{"patch"}, Resource: "httproutes.gateway.networking.k8s.io", Namespace: "shop"}), "PermissionMissing"},
		{fmt.Errorf("nothing was written: %w", &kube.MissingError{}), "RouteNotFound"},
		{fmt.Errorf("nothing was written: %w", &kube.TooManyRoutesError{}), "InvalidConfig"},
		{fmt.Errorf("experiment %w", &kube.MissingServiceError{Namespace: "shop", Name: "exp"}), "ServiceNotFound"},
		{fmt.Errorf("in route cluster %q: %w", "fleet", about(&desired.MissingImportError{Route: web, Rollout: "shop/web"})), "ServiceImportMissing"},
		{about(&desired.ConflictError{Route: web, Rollout: "shop/web", Managers: []string{"argocd"}}), "Conflict"},
		{about(&desired.InvalidError{Err: &transform.LimitError{Msg: "17 rules"}}), "LimitExceeded"},
		{about(&desired.UnsupportedError{Route: web, Rollout: "shop/web"}), "GatewayUnsupported"},
		{about(&desired.InvalidError{Err: &routes.SchemaError{Kind: routes.HTTPRoute}}), "CRDTooOld"},
		{about(&desired.InvalidError{Err: &transform.NoWeightedRuleError{Route: web}}), "RouteMismatch"},
		{about(fmt.Errorf("the apiserver rejected the new rules as invalid: %w",
			apierrors.NewInvalid(schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}, "web", nil))), "WriteRejected"},
		{about(fmt.Errorf("not confirmed written before the call's deadline: %w", context.DeadlineExceeded)), "ApiserverUnavailable"},
		{about(apierrors.NewServiceUnavailable("etcd is down")), "ApiserverUnavailable"},
		{Panic{Value: "index out of range"}, "InternalError"},
		{errors.New("the route kept changing under the plugin"), "CallFailed"},
		// Several routes: the first reason of the list wins, whatever the order.
		{fmt.Errorf("nothing was written: %w", errors.Join(
			routes.RouteError(web, &desired.InvalidError{Err: &transform.LimitError{Msg: "17 rules"}}),
			routes.RouteError(web, &desired.ConflictError{Route: web}))), "Conflict"},
	} {
		if got := Reason(tc.err); got != tc.want {
			t.Errorf("Reason(%q) = %s, want %s", tc.err, got, tc.want)
		}
	}
}

// The route's owners hear of what the route refused, not of what the
// Rollout or the plugin must fix.
func TestRoutesHearOfRefusalsOnly(t *testing.T) {
	r := newRecorder(newAPI(), Options{}, nil)
	routesEvents := NewRoutes(r)
	live := corev1.ObjectReference{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute", Namespace: "shop", Name: "web", UID: "uid-route"}
	routesEvents.Refused(live, setWeight30, routes.RouteError(web, &desired.ConflictError{Route: web, Rollout: "shop/web", Managers: []string{"argocd"}}))
	routesEvents.Refused(live, setWeight30, routes.RouteError(web, &kubeclient.PermissionError{Verbs: []string{"patch"}}))
	routesEvents.Refused(live, setWeight30, routes.RouteError(web, apierrors.NewServiceUnavailable("etcd is down")))
	got := drain(r)
	want := []Event{{
		Regarding: corev1.ObjectReference{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute", Namespace: "shop", Name: "web", UID: "uid-route"},
		Related:   &corev1.ObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Namespace: "shop", Name: "web"},
		Type:      "Warning", Reason: "Conflict", Action: "SetWeight",
		Note: "rollout shop/web: SetWeight(30): " + (&desired.ConflictError{Route: web, Rollout: "shop/web", Managers: []string{"argocd"}}).Error(),
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// drain takes the Events recorded so far out of r's queue.
func drain(r *Recorder) []Event {
	var out []Event
	for {
		select {
		case e := <-r.queue:
			out = append(out, *e)
		default:
			return out
		}
	}
}

// A walk's changes, as desired words them, are each told under the reason
// of their kind, in the order Changed records them.
func TestEveryChangeOfAWalkHasItsReason(t *testing.T) {
	data, err := yaml.YAMLToJSON([]byte(`
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web, namespace: shop, uid: uid-route}
spec:
  rules:
  - matches: [{path: {type: PathPrefix, value: /}}]
    backendRefs:
    - {group: "", kind: Service, name: stable, port: 80, weight: 100}
    - {group: "", kind: Service, name: canary, port: 80, weight: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	var u unstructured.Unstructured
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	live, err := routes.FromUnstructured(&u)
	if err != nil {
		t.Fatal(err)
	}
	stable, canary := routes.ServiceRef("shop", "stable"), routes.ServiceRef("shop", "canary")
	services := transform.RolloutServices{Stable: stable, Canary: canary, ManagedRoutes: []string{"beta", "mirror"}}
	split := func(w, reserved int64) transform.Split {
		return transform.Split{Stable: stable, Canary: canary, CanaryWeight: w, MaxWeight: 100, Reserved: reserved}
	}
	exp := func(weights ...int64) transform.ExperimentInput {
		ports := []corev1.ServicePort{{Name: "http", Port: 80}}
		in := transform.ExperimentInput{RolloutNamespace: "shop", Stable: stable, Canary: canary, StablePorts: ports}
		for _, w := range weights {
			in.Destinations = append(in.Destinations, transform.ExperimentDestination{Service: "exp", Weight: w, Ports: ports})
		}
		return in
	}
	pct := int32(50)
	header := func(value string) desired.Intent {
		return desired.SetHeader{Name: "beta", Rules: services, Match: []transform.HeaderMatch{{Name: "X-Canary", Value: &transform.StringMatch{Exact: value}}}}
	}
	mirror := desired.SetMirror{Name: "mirror", Rules: services, Percent: &pct, Match: []transform.RequestMatch{{Path: &transform.StringMatch{Prefix: "/api"}}}}
	env := desired.Env{Rollout: "shop/web", FieldManager: "argo-rollouts-gatewayapi", TakesHeaderRoutes: true}
	sticky := &transform.Sticky{Cookie: "web-canary", MaxAge: 60, StableHash: "aaa", CanaryHash: "bbb", RuleBase: "web-sticky"}
	filterEnv := env
	filterEnv.MirrorMode = desired.MirrorFilter
	for _, step := range []struct {
		call desired.Intent
		env  desired.Env
		want []string
	}{
		{desired.SetWeight{Split: split(30, 0), Experiment: exp()}, env, []string{"WeightsChanged"}},
		{desired.SetWeight{Split: split(30, 5), Experiment: exp(5)}, env, []string{"WeightsChanged", "ExperimentBackendsAdded"}},
		{desired.SetWeight{Split: split(30, 10), Experiment: exp(10)}, env, []string{"WeightsChanged"}}, // the experiment backend's weight too
		{header("yes"), env, []string{"RulesAdded"}},
		{header("please"), env, []string{"RulesChanged"}},
		{mirror, env, []string{"RulesAdded"}},
		{desired.RemoveManaged{}, env, []string{"RulesRemoved"}},
		{mirror, filterEnv, []string{"MirrorFiltersAdded"}},
		{desired.RemoveManaged{}, filterEnv, []string{"MirrorFiltersRemoved"}},
		{desired.SetWeight{Split: split(30, 0), Experiment: exp(), Sticky: sticky}, env, []string{"WeightsChanged", "ExperimentBackendsRemoved", "RulesAdded", "StickyCookiesAdded"}},
		{desired.SetWeight{Split: split(0, 0), Experiment: exp()}, env, []string{"WeightsChanged", "RulesRemoved", "StickyCookiesRemoved"}},
	} {
		res, err := step.call.Desired(live, step.env)
		if err != nil {
			t.Fatalf("%T: %v", step.call, err)
		}
		for _, c := range res.Changes {
			if c.Kind.Reason() == "" && c.Kind != routes.Bookkeeping {
				t.Errorf("%T: change %q has no reason of its own", step.call, c)
			}
		}
		r := newRecorder(newAPI(), Options{}, nil)
		for _, n := range routes.Changes(res.Changes).Notes() {
			NewRoutes(r).Changed(corev1.ObjectReference{Kind: "HTTPRoute", Namespace: "shop", Name: "web"}, setWeight30, n.Reason, n.Text)
		}
		var got []string
		for _, e := range drain(r) {
			got = append(got, e.Reason)
		}
		if diff := cmp.Diff(step.want, got); diff != "" {
			t.Errorf("%T %v: reasons (-want +got):\n%s", step.call, res.Changes, diff)
		}
		live.Rules, live.Annotations, live.Labels = res.Rules, res.Annotations, res.Labels
		live.ManagedFields = routes.NewManagedFields(ownedByPlugin)
	}
	for kind := routes.WeightChanged; kind < routes.Bookkeeping; kind++ {
		if kind.Reason() == "" {
			t.Errorf("change kind %d is told under no reason", kind)
		}
	}
}

// ownedByPlugin: the plugin's applies own spec.rules and its annotation, as
// after its write.
var ownedByPlugin = []metav1.ManagedFieldsEntry{{
	Manager: "argo-rollouts-gatewayapi", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "gateway.networking.k8s.io/v1",
	FieldsType: "FieldsV1",
	FieldsV1:   metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{"f:gatewayapi-ssa.dev/claims":{}}},"f:spec":{"f:rules":{}}}`),
}}

package routes

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// servedJSON is a route as the apiserver serves it after a few steps: every
// part the plugin reads, and parts it drops (uid, timestamps, hostnames).
// kube's tests of the one-pass decoder read the same route (kube/decode_test.go).
const servedJSON = `{"apiVersion":"gateway.networking.k8s.io/v1","kind":"HTTPRoute","metadata":{` +
	`"annotations":{"gatewayapi-ssa.dev/claims":"{\"shop/web\":{\"canaryWeight\":20}}"},` +
	`"creationTimestamp":"2026-12-01T15:01:47Z","generation":5,` +
	`"labels":{"app":"web","rollouts.argoproj.io/gatewayapi-canary":"in-progress"},` +
	`"managedFields":[` +
	`{"apiVersion":"gateway.networking.k8s.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{".":{},"f:hostnames":{},"f:parentRefs":{},"f:rules":{}}},"manager":"kubectl-create","operation":"Update","time":"2026-12-01T15:01:47Z"},` +
	`{"apiVersion":"gateway.networking.k8s.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:annotations":{"f:gatewayapi-ssa.dev/claims":{}}},"f:spec":{"f:rules":{}}},"manager":"argo-rollouts-gatewayapi","operation":"Apply","time":"2026-12-01T15:01:48Z"},` +
	`{"apiVersion":"gateway.networking.k8s.io/v1","fieldsType":"FieldsV1","fieldsV1":{"f:status":{"f:parents":{}}},"manager":"traefik","operation":"Update","subresource":"status","time":"2026-12-01T15:01:49Z"}],` +
	`"name":"web","namespace":"shop","resourceVersion":"419","uid":"8d1c7e1a-4a0e-4b6f-9a55-0d1a2c3b4e5f"},` +
	`"spec":{"hostnames":["web.example.com"],"parentRefs":[{"group":"gateway.networking.k8s.io","kind":"Gateway","name":"gw","sectionName":"http","port":80}],` +
	`"rules":[{"name":"main","backendRefs":[{"group":"","kind":"Service","name":"stable","port":80,"weight":80},{"group":"","kind":"Service","name":"canary","port":80,"weight":20}],` +
	`"matches":[{"path":{"type":"PathPrefix","value":"/"}}],"timeouts":{"request":"10s"},"x-newer":1.5}]},` +
	`"status":{"parents":[{"controllerName":"traefik.io/gateway-controller","parentRef":{"name":"gw"},` +
	`"conditions":[{"type":"Accepted","status":"True","reason":"Accepted","message":"ok","observedGeneration":5,"lastTransitionTime":"2026-12-01T15:01:49Z"}]}]}}`

// servedObject is servedJSON as an unstructured object.
func servedObject(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON([]byte(servedJSON)); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestDeepCopyOfAnEmptyRouteStaysEmpty(t *testing.T) {
	if diff := cmp.Diff(Route{}, Route{}.DeepCopy()); diff != "" {
		t.Error(diff)
	}
}

// Read field by field, managedFields come out as the reflecting converter of
// Unstructured.GetManagedFields makes them.
func TestManagedFieldsReadAsGetManagedFieldsReadsThem(t *testing.T) {
	u := servedObject(t)
	at := metav1.NewTime(time.Date(2026, 5, 1, 12, 30, 0, 0, time.UTC))
	u.SetManagedFields([]metav1.ManagedFieldsEntry{
		{Manager: "kubectl-create", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: Group + "/v1", Time: &at,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:rules":{},"f:hostnames":{}}}`)},
		{Manager: "argo-rollouts-gatewayapi", Operation: metav1.ManagedFieldsOperationApply, APIVersion: Group + "/v1",
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:x":{}}}}`)},
		{Manager: "gateway", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"},
	})
	got, err := managedFields(u)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(u.GetManagedFields(), got); diff != "" {
		t.Errorf("managedFields (-GetManagedFields +read):\n%s", diff)
	}
}

// Reading without a copy reads the same route.
func TestFromUnstructuredNoCopyReadsTheSameRoute(t *testing.T) {
	copied, err := FromUnstructured(servedObject(t))
	if err != nil {
		t.Fatal(err)
	}
	shared, err := FromUnstructuredNoCopy(servedObject(t))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(copied, shared); diff != "" {
		t.Errorf("(-copied +not copied):\n%s", diff)
	}
}

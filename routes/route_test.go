package routes

import (
	"os"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// servedObject is testdata/served-route.json as an unstructured object: a
// route as the apiserver serves it after a few steps, with every part the
// plugin reads and parts it drops (uid, timestamps, hostnames). kube's tests
// of the one-pass decoder read the same file (kube/decode_test.go).
func servedObject(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile("testdata/served-route.json")
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
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

package kube

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// A ServiceImport is read in the version its group prefers, asked once per
// group: present, missing, refused, and a group the cluster does not serve
// each answer as a user needs to read them.
func TestServiceImported(t *testing.T) {
	f := kubetest.New(t)
	f.Script("/apis/net.gke.io", http.StatusOK, `{"kind":"APIGroup","apiVersion":"v1","name":"net.gke.io","versions":[{"groupVersion":"net.gke.io/v1","version":"v1"}],"preferredVersion":{"groupVersion":"net.gke.io/v1","version":"v1"}}`)
	f.Script("/apis/net.gke.io/v1/namespaces/store/serviceimports/store-canary", http.StatusOK, `{"kind":"ServiceImport","apiVersion":"net.gke.io/v1","metadata":{"name":"store-canary","namespace":"store"}}`)
	f.Script("/apis/net.gke.io/v1/namespaces/store/serviceimports/store-exp", http.StatusNotFound, kubetest.Status(http.StatusNotFound, "NotFound"))
	f.Script("/apis/net.gke.io/v1/namespaces/locked/serviceimports/store-exp", http.StatusForbidden, kubetest.Status(http.StatusForbidden, "Forbidden"))
	f.Script("/apis/multicluster.x-k8s.io", http.StatusNotFound, kubetest.Status(http.StatusNotFound, "NotFound"))
	gw, err := gateway.NewForConfig(&rest.Config{Host: f.URL(), QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	c := NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(logrus.New()))
	gke := func(ns, name string) routes.ObjectRef {
		return routes.ObjectRef{Group: "net.gke.io", Kind: "ServiceImport", Namespace: ns, Name: name}
	}
	for _, tc := range []struct {
		ref     routes.ObjectRef
		want    bool
		wantErr string
	}{
		{ref: gke("store", "store-canary"), want: true},
		{ref: gke("store", "store-exp"), want: false},
		{ref: gke("locked", "store-exp"), wantErr: "reading ServiceImport.net.gke.io locked/store-exp: forbidden: grant the plugin's ServiceAccount get on serviceimports.net.gke.io in namespace locked"},
		{ref: routes.ObjectRef{Group: "multicluster.x-k8s.io", Kind: "ServiceImport", Namespace: "store", Name: "store-exp"},
			wantErr: "the cluster serves no API group multicluster.x-k8s.io, so it has no ServiceImport of that group"},
	} {
		got, err := c.ServiceImported(context.Background(), tc.ref)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.ref, err)
		case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want one beginning %q", tc.ref, err, tc.wantErr)
		case got != tc.want:
			t.Errorf("%s: %v, want %v", tc.ref, got, tc.want)
		}
		var perm *kubeclient.PermissionError
		if strings.Contains(tc.wantErr, "forbidden") && !errors.As(err, &perm) {
			t.Errorf("%s: %T, want a *kubeclient.PermissionError", tc.ref, err)
		}
	}
	if n := f.Asked("/apis/net.gke.io"); n != 1 {
		t.Errorf("the group's versions were asked %d times, want once", n)
	}
}

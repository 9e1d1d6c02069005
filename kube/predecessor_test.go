package kube

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"k8s.io/client-go/rest"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The argoproj-labs plugin's ConfigMap is read as it wrote it, once a
// minute at most; one that is not there, or that the plugin may not read,
// records nothing (the latter said once in the log); a key it did not write
// that way is an error naming it.
func TestPredecessorRecords(t *testing.T) {
	f := kubetest.New(t)
	const path = "/api/v1/namespaces/%s/configmaps/argo-gatewayapi-configmap"
	f.Script(fmt.Sprintf(path, "shop"), http.StatusOK, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"argo-gatewayapi-configmap","namespace":"shop"},
		"data":{"httpManagedRoutes":"{\"beta\":{\"front\":2,\"back\":1}}","grpcManagedRoutes":"{\"beta\":{\"api\":3}}"}}`)
	f.Script(fmt.Sprintf(path, "locked"), http.StatusForbidden, kubetest.Status(http.StatusForbidden, "Forbidden"))
	f.Script(fmt.Sprintf(path, "bad"), http.StatusOK, `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"argo-gatewayapi-configmap","namespace":"bad"},"data":{"httpManagedRoutes":"[1,2]"}}`)
	f.Script(fmt.Sprintf(path, "none"), http.StatusNotFound, kubetest.Status(http.StatusNotFound, "NotFound"))
	gw, err := gateway.NewForConfig(&rest.Config{Host: f.URL(), QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	logger, hook := logtest.NewNullLogger()
	c := NewCluster(gw.GatewayV1().RESTClient(), logrus.NewEntry(logger))
	ctx := context.Background()
	const cm = routes.PredecessorConfigMap

	shop, err := c.PredecessorRecords(ctx, "shop", cm)
	if err != nil {
		t.Fatal(err)
	}
	indexes := map[string]map[string]int{
		"front": shop.Indexes(routes.Ref{Kind: routes.HTTPRoute, Namespace: "shop", Name: "front"}),
		"api":   shop.Indexes(routes.Ref{Kind: routes.GRPCRoute, Namespace: "shop", Name: "api"}),
		"tcp":   shop.Indexes(routes.Ref{Kind: routes.TCPRoute, Namespace: "shop", Name: "front"}),
	}
	if diff := cmp.Diff(map[string]map[string]int{"front": {"beta": 2}, "api": {"beta": 3}, "tcp": nil}, indexes); diff != "" {
		t.Errorf("the records by route (-want +got):\n%s", diff)
	}
	for _, ns := range []string{"none", "locked", "locked"} {
		if got, err := c.PredecessorRecords(ctx, ns, cm); err != nil || got.HTTP != nil || got.GRPC != nil {
			t.Errorf("%s: %+v, %v; want nothing recorded and no error", ns, got, err)
		}
	}
	if _, err := c.PredecessorRecords(ctx, "bad", cm); err == nil || !strings.Contains(err.Error(), "key httpManagedRoutes is not what the argoproj-labs/gatewayAPI plugin writes") {
		t.Errorf("a key it did not write: %v", err)
	}
	if _, err := c.PredecessorRecords(ctx, "shop", cm); err != nil {
		t.Fatal(err)
	}
	if n := f.Asked("/api/v1/namespaces/shop/configmaps/" + cm); n != 1 {
		t.Errorf("read %d times within a minute, want once", n)
	}
	warned := 0
	for _, e := range hook.AllEntries() {
		if strings.Contains(e.Message, "cannot read the argoproj-labs/gatewayAPI plugin's ConfigMap") {
			warned++
		}
	}
	if warned != 1 {
		t.Errorf("the refusal was logged %d times, want once", warned)
	}
}

//go:build envoy

package envoy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// routeKinds are the route kinds read for a translation, each with its
// resource, and the key of egctl's output that holds them with their status.
var routeKinds = []struct {
	kind, resource, outKey string
}{
	{"HTTPRoute", "httproutes", "httpRoutes"},
	{"GRPCRoute", "grpcroutes", "grpcRoutes"},
	{"TCPRoute", "tcproutes", "tcpRoutes"},
	{"TLSRoute", "tlsroutes", "tlsRoutes"},
	{"UDPRoute", "udproutes", "udpRoutes"},
}

func gatewayAPI(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: resource}
}

// translation is what Envoy Gateway makes of a namespace's Gateway API
// objects: the xDS of its Gateway, and the status it gives each route.
type translation struct {
	envoy *envoyConfig
	// status is each route's status ("HTTPRoute/name") as Envoy Gateway
	// computes it.
	status map[string]map[string]any
}

// translate reads the GatewayClass, the Gateway named gateway and every
// route and Service of namespace ns from the apiserver, as they are now,
// writes them to a file (spec only: Envoy Gateway's loader reads nothing
// else), and runs Envoy Gateway's translator on it:
// egctl x translate --from gateway-api --to gateway-api,xds. Without
// --add-missing-resources: the input is whole, and that flag would make up
// a Service a route names and the namespace lacks.
func translate(t *testing.T, ns, class, gateway string) *translation {
	t.Helper()
	ctx := context.Background()
	var docs []map[string]any
	add := func(u *unstructured.Unstructured) {
		meta := map[string]any{"name": u.GetName()}
		if u.GetNamespace() != "" {
			meta["namespace"] = u.GetNamespace()
		}
		docs = append(docs, map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind(), "metadata": meta, "spec": u.Object["spec"]})
	}
	gc, err := cluster.Dynamic.Resource(gatewayAPI("gatewayclasses")).Get(ctx, class, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add(gc)
	gw, err := cluster.Dynamic.Resource(gatewayAPI("gateways")).Namespace(ns).Get(ctx, gateway, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	add(gw)
	for _, k := range routeKinds {
		list, err := cluster.Dynamic.Resource(gatewayAPI(k.resource)).Namespace(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			list.Items[i].SetAPIVersion("gateway.networking.k8s.io/v1")
			list.Items[i].SetKind(k.kind)
			add(&list.Items[i])
		}
	}
	services, err := cluster.Dynamic.Resource(schema.GroupVersionResource{Version: "v1", Resource: "services"}).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range services.Items {
		services.Items[i].SetAPIVersion("v1")
		services.Items[i].SetKind("Service")
		add(&services.Items[i])
	}
	var in bytes.Buffer
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		in.WriteString("---\n")
		in.Write(b)
	}
	file := filepath.Join(t.TempDir(), "resources.yaml")
	if err := os.WriteFile(file, in.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(egctl, "x", "translate", "--from", "gateway-api", "--to", "gateway-api,xds",
		"--type", "all", "--output", "json", "--file", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("egctl x translate: %v\n%s\ninput:\n%s", err, stderr.String(), in.String())
	}
	// ENVOY_XDS_DIR keeps every input and answer, to read Envoy's configuration.
	if dir := os.Getenv("ENVOY_XDS_DIR"); dir != "" {
		translations++
		base := filepath.Join(dir, fmt.Sprintf("%s-%03d", notDNS.ReplaceAllString(t.Name(), "-"), translations))
		if err := errors.Join(os.WriteFile(base+".in.yaml", in.Bytes(), 0o644), os.WriteFile(base+".out.json", out, 0o644)); err != nil {
			t.Fatal(err)
		}
	}
	tr := &translation{status: map[string]map[string]any{}}
	var result map[string]json.RawMessage
	if err := json.Unmarshal(out, &result); err != nil {
		t.Fatalf("egctl's output: %v", err)
	}
	for _, k := range routeKinds {
		var routes []struct {
			Metadata struct{ Name string } `json:"metadata"`
			Status   map[string]any        `json:"status"`
		}
		if raw, ok := result[k.outKey]; ok {
			if err := json.Unmarshal(raw, &routes); err != nil {
				t.Fatalf("egctl's %s: %v", k.outKey, err)
			}
		}
		for _, r := range routes {
			tr.status[k.kind+"/"+r.Metadata.Name] = r.Status
		}
	}
	var xds map[string]json.RawMessage
	if err := json.Unmarshal(result["xds"], &xds); err != nil {
		t.Fatalf("egctl's xds: %v", err)
	}
	dump, ok := xds[ns+"/"+gateway]
	if !ok {
		t.Fatalf("egctl's xds has no Gateway %s/%s: %s", ns, gateway, strings.Join(keys(xds), ", "))
	}
	if tr.envoy, err = parseConfigDump(dump); err != nil {
		t.Fatalf("Envoy's configuration: %v", err)
	}
	return tr
}

// translations counts the translations, to name the files ENVOY_XDS_DIR keeps.
var translations int

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// conditions are a route status's conditions of every parent, "type=status", in order.
func conditions(status map[string]any) []string {
	var out []string
	parents, _ := status["parents"].([]any)
	for _, p := range parents {
		conds, _ := p.(map[string]any)["conditions"].([]any)
		for _, c := range conds {
			m := c.(map[string]any)
			out = append(out, fmt.Sprintf("%s=%s", m["type"], m["status"]))
		}
	}
	return out
}

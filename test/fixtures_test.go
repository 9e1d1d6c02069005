package test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	rolloutsrpc "github.com/argoproj/argo-rollouts/rollout/trafficrouting/plugin/rpc"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

const fieldManager = "argo-rollouts-gatewayapi"

var (
	namespaces = struct {
		sync.Mutex
		made map[string]int // of each test, by name
	}{made: map[string]int{}}
	notDNS = regexp.MustCompile(`[^a-z0-9]+`)
)

// namespace creates a fresh namespace holding Services "stable" and "canary".
// Its name is the test's and how many the test made before it: the same on
// every run whatever order the parallel tests start in, so that what names
// it (a rule's backendRefs, and the claims' digests of those rules) is too,
// and hack/compare-writes.sh compares two runs. A name cut to fit ends in a
// digest of the whole, so two tests whose names start alike do not share one.
func namespace(t *testing.T, c *harness.Cluster) string {
	t.Helper()
	namespaces.Lock()
	namespaces.made[t.Name()]++
	n := namespaces.made[t.Name()]
	namespaces.Unlock()
	prefix := fmt.Sprintf("t%d-", n)
	slug := strings.Trim(notDNS.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(prefix)+len(slug) > 50 {
		sum := sha256.Sum256([]byte(t.Name()))
		slug = strings.TrimRight(slug[:50-len(prefix)-7], "-") + "-" + hex.EncodeToString(sum[:3])
	}
	name := prefix + slug
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, svc := range []string{"stable", "canary"} {
		s := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: svc, Namespace: name},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": "demo"},
				Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			},
		}
		if _, err := c.Kube.CoreV1().Services(name).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return name
}

// create creates an object from YAML the way `kubectl create` does (an Update
// under manager kubectl-create), in namespace ns, and returns it as stored.
func create(t *testing.T, c *harness.Cluster, ns, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("bad test manifest: %v\n%s", err, manifest)
	}
	u.SetNamespace(ns)
	gvr := gvrOf(u)
	out, err := c.Dynamic.Resource(gvr).Namespace(ns).Create(context.Background(), u, metav1.CreateOptions{FieldManager: "kubectl-create"})
	if err != nil {
		t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
	}
	return out
}

func gvrOf(u *unstructured.Unstructured) schema.GroupVersionResource {
	gv := u.GroupVersionKind().GroupVersion()
	return gv.WithResource(strings.ToLower(u.GetKind()) + "s")
}

// get reads a route as stored.
func get(t *testing.T, c *harness.Cluster, version, kind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	gvr := schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: version, Resource: strings.ToLower(kind) + "s"}
	u, err := c.Dynamic.Resource(gvr).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading %s %s/%s: %v", kind, ns, name, err)
	}
	return u
}

// weights maps "rule/backend name" to weight, for every backendRef of the route.
func weights(u *unstructured.Unstructured) map[string]int64 {
	out := map[string]int64{}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	for i, r := range rules {
		refs, _, _ := unstructured.NestedSlice(r.(map[string]any), "backendRefs")
		for _, b := range refs {
			m := b.(map[string]any)
			w, _ := m["weight"].(int64)
			out[fmt.Sprintf("%d/%s", i, m["name"])] = w
		}
	}
	return out
}

// rollout is a Rollout with stable and canary Services and the given plugin config.
func rollout(ns, config string) *v1alpha1.Rollout {
	return &v1alpha1.Rollout{
		ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{
			StableService: "stable",
			CanaryService: "canary",
			TrafficRouting: &v1alpha1.RolloutTrafficRouting{
				Plugins: map[string]json.RawMessage{"argoproj-labs/gatewayAPI": json.RawMessage(config)},
			},
		}}},
	}
}

// startPlugin starts the real plugin binary for a test; its log goes to the test log.
func startPlugin(t *testing.T, c *harness.Cluster, args ...string) rolloutsrpc.TrafficRouterPlugin {
	t.Helper()
	p, err := harness.StartPlugin(pluginBin, c.Kubeconfig, kubetest.Log(t), args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p.Plugin
}

// eventually polls cond until it holds or 10 s pass.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventuallyWithin(t, 10*time.Second, what, cond)
}

// eventuallyWithin polls cond until it holds or d passes: 200 times in d at
// most, and at least every half second.
func eventuallyWithin(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(min(max(d/200, 50*time.Millisecond), 500*time.Millisecond))
	}
}

// ownsRules says whether manager owns spec.rules through Apply.
func ownsRules(u *unstructured.Unstructured, manager string) bool {
	for _, e := range u.GetManagedFields() {
		if e.Manager == manager && e.Operation == metav1.ManagedFieldsOperationApply && e.FieldsV1 != nil &&
			strings.Contains(e.FieldsV1.GetRawString(), `"f:rules"`) {
			return true
		}
	}
	return false
}

// pluginWrites returns the writes of routes the plugin sent (by user agent;
// not its Lease, which it renews every few seconds).
func pluginWrites(c *harness.Cluster) []harness.Request {
	var out []harness.Request
	for _, r := range c.Recorder.Writes() {
		if strings.HasPrefix(r.UserAgent, "rollouts-gatewayapi-ssa") && !strings.HasPrefix(r.Path, "/apis/coordination.k8s.io/") {
			out = append(out, r)
		}
	}
	return out
}

// pluginLog is a plugin's log: passed to the test log, and kept to look at.
type pluginLog struct {
	t  *testing.T
	mu sync.Mutex
	b  strings.Builder
}

func (l *pluginLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// Count is how many lines of the log contain every one of subs.
func (l *pluginLog) Count(subs ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range strings.Split(l.b.String(), "\n") {
		if _, ok := containsAll(line, subs); ok {
			n++
		}
	}
	return n
}

func containsAll(s string, subs []string) (string, bool) {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return sub, false
		}
	}
	return "", true
}

// startPluginWith starts a plugin binary with a kubeconfig and keeps its log.
func startPluginWith(t *testing.T, bin, kubeconfig string, args ...string) (rolloutsrpc.TrafficRouterPlugin, *pluginLog) {
	t.Helper()
	log := &pluginLog{t: t}
	p, err := harness.StartPlugin(bin, kubeconfig, log, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p.Plugin, log
}

// Command demo shows what the plugin does to a Gateway API HTTPRoute during a
// canary, on a real kube-apiserver, for someone seeing the plugin for the
// first time.
//
// `make demo` runs it as it is: the real Argo Rollouts controller walks a
// Rollout on a cluster of local processes (controller.go, on the cluster of
// test/e2e/cluster).
//
// `make demo-plugin` runs it with -plugin-only: it starts a local control plane (kube-apiserver and etcd from envtest, with
// the Gateway API v1.6.3 standard CRDs), applies docs/examples/demo.yaml the
// way kubectl would, starts the real plugin binary over go-plugin RPC exactly
// as the Argo Rollouts controller does, and then plays the controller: it
// calls SetWeight for every step of a canary. After each step it prints the
// route's weights, labels, resourceVersion and managedFields, and how many
// writes the plugin sent, so you can see that every write is one server-side
// apply under the field manager argo-rollouts-gatewayapi, that nothing is
// sent when nothing changes, and that another owner's edit survives.
//
// The demo prints to stdout; the plugin's own log lines go to stderr,
// prefixed with "plugin |". It exits non-zero if any step fails or the route
// does not end up as the step says it should.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	e2ecluster "github.com/gatewayapi-ssa/rollouts-plugin/test/e2e/cluster"
	"github.com/gatewayapi-ssa/rollouts-plugin/test/harness"
)

const (
	namespace    = "demo"
	routeName    = "rollouts-demo"
	stableSvc    = "rollouts-demo-stable"
	canarySvc    = "rollouts-demo-canary"
	pluginName   = "argoproj-labs/gatewayAPI"
	fieldManager = "argo-rollouts-gatewayapi"
	// editedHostname is what "another owner" adds to the route in step 6.
	editedHostname = "www.demo.example.com"
)

func main() {
	// Ctrl-C cancels ctx instead of killing the process, so run's deferred
	// cleanup stops the plugin and the control plane on the way out.
	pluginOnly := flag.Bool("plugin-only", false, "play the controller: call the plugin over RPC directly, on kube-apiserver and etcd only (make demo-plugin)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	demo := runController
	if *pluginOnly {
		demo = run
	}
	if err := demo(ctx, os.Stdout); err != nil {
		stop()
		fmt.Fprintf(os.Stderr, "\ndemo failed: %v\n", err)
		os.Exit(1)
	}
}

// run is the whole plugin-only demo; every resource it starts is stopped
// before it returns.
func run(ctx context.Context, out io.Writer) (err error) {
	d := &demo{ctx: ctx, out: out}
	d.title("Argo Rollouts Gateway API plugin (server-side apply): demo")

	cluster, err := startCluster(out)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(out, "Stopping the control plane.")
		if stopErr := cluster.Stop(); stopErr != nil {
			err = errors.Join(err, fmt.Errorf("stopping the control plane: %w", stopErr))
		}
	}()
	d.cluster, d.kube, d.dyn = cluster, cluster.Kube, cluster.Dynamic
	if err := d.interrupted(); err != nil {
		return err
	}

	binDir, err := os.MkdirTemp("", "gatewayapi-ssa-demo-")
	if err != nil {
		return fmt.Errorf("creating a directory for the plugin binary: %w", err)
	}
	defer os.RemoveAll(binDir)
	fmt.Fprintln(out, "Building the plugin binary (go build) ...")
	bin, err := harness.BuildPlugin(binDir)
	if err != nil {
		return fmt.Errorf("building the plugin: %w", err)
	}

	if err := d.applyExamples(filepath.Join(harness.RepoRoot(), "docs", "examples", "demo.yaml")); err != nil {
		return err
	}

	fmt.Fprintln(out, "Starting the plugin binary over go-plugin RPC, as the Argo Rollouts controller does;")
	fmt.Fprintln(out, "its log lines go to stderr, prefixed with \"plugin |\".")
	plugin, err := harness.StartPlugin(bin, cluster.Kubeconfig, e2ecluster.NewLineWriter(func(line string) {
		fmt.Fprintf(os.Stderr, "plugin | %s\n", line)
	}))
	if err != nil {
		return fmt.Errorf("starting the plugin: %w", err)
	}
	defer func() {
		fmt.Fprintln(out, "\nStopping the plugin.")
		plugin.Stop()
	}()
	d.plugin = plugin

	d.rollout = demoRollout()
	if err := d.showRollout(); err != nil {
		return err
	}
	if err := d.showInitialRoute(); err != nil {
		return err
	}
	if err := d.walkCanary(); err != nil {
		return err
	}
	if err := d.anotherOwnerEdits(); err != nil {
		return err
	}
	d.title("Done")
	fmt.Fprintf(out, "Every change the plugin made was one server-side apply under the field manager\n%q; giving ownership back at the end of a rollout was one Update.\n", fieldManager)
	fmt.Fprintln(out, "When Argo CD changed the weights mid-rollout the plugin answered with an error and wrote nothing.")
	fmt.Fprintln(out, "Asking for the weight the route already had sent nothing.")
	fmt.Fprintln(out, "The hostname another owner added stayed on the route.")
	return nil
}

// startCluster starts the control plane, saying first how long that may take,
// because the very first run builds kube-apiserver from source.
func startCluster(out io.Writer) (*harness.Cluster, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(out, "KUBEBUILDER_ASSETS is not set: hack/envtest-assets.sh will find or build kube-apiserver")
		fmt.Fprintln(out, "and etcd. The first time, building them takes about 10 minutes; later runs reuse them.")
	}
	fmt.Fprintln(out, "Starting a local control plane (kube-apiserver + etcd, Gateway API v1.6.3 standard CRDs) ...")
	start := time.Now()
	cluster, err := harness.Start(harness.Standard)
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	fmt.Fprintf(out, "Control plane up in %s.\n", time.Since(start).Round(100*time.Millisecond))
	return cluster, nil
}

// demo holds what every step needs.
type demo struct {
	ctx context.Context
	out io.Writer
	// kube and dyn talk to the apiserver as admin (not through the recorder).
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	cluster *harness.Cluster // plugin-only demo
	plugin  *harness.PluginProcess
	rollout *v1alpha1.Rollout
	// lastRV is the route's resourceVersion at the previous snapshot, to show
	// whether a step changed the route at all.
	lastRV string
	step   int
}

// interrupted returns an error once Ctrl-C was pressed; steps call it first so
// the demo stops between steps rather than in the middle of one.
func (d *demo) interrupted() error {
	if err := d.ctx.Err(); err != nil {
		return fmt.Errorf("interrupted: %w", err)
	}
	return nil
}

func (d *demo) title(s string) {
	fmt.Fprintf(d.out, "\n=== %s %s\n", s, strings.Repeat("=", max(0, 72-len(s))))
}

// applyExamples creates the objects of a multi-document YAML file with a
// server-side apply under the field manager "kubectl", which is what
// `kubectl apply --server-side -f` does. The dynamic client plus a discovery
// REST mapper handles any kind in the file, so the file can change freely.
func (d *demo) applyExamples(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the example objects: %w", err)
	}
	objs, err := decodeObjects(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	groups, err := restmapper.GetAPIGroupResources(d.kube.Discovery())
	if err != nil {
		return fmt.Errorf("discovering the apiserver's resources: %w", err)
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)

	fmt.Fprintf(d.out, "Applying %s (kubectl apply --server-side, field manager \"kubectl\"):\n", relToRepo(path))
	for _, obj := range objs {
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return fmt.Errorf("%s %s: no such resource on the apiserver: %w", gvk.Kind, obj.GetName(), err)
		}
		body, err := json.Marshal(obj.Object)
		if err != nil {
			return fmt.Errorf("encoding %s %s: %w", gvk.Kind, obj.GetName(), err)
		}
		res := d.dyn.Resource(mapping.Resource)
		var client interface {
			Patch(context.Context, string, types.PatchType, []byte, metav1.PatchOptions, ...string) (*unstructured.Unstructured, error)
		} = res
		if obj.GetNamespace() != "" {
			client = res.Namespace(obj.GetNamespace())
		}
		if _, err := client.Patch(d.ctx, obj.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "kubectl"}); err != nil {
			return fmt.Errorf("applying %s %s: %w", gvk.Kind, qualified(obj.GetNamespace(), obj.GetName()), err)
		}
		fmt.Fprintf(d.out, "  %s/%s applied\n", strings.ToLower(gvk.Kind), qualified(obj.GetNamespace(), obj.GetName()))
	}
	return nil
}

// decodeObjects splits a YAML stream into objects, skipping empty documents
// (a file may start with comments and ---).
func decodeObjects(data []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// demoRollout is the Rollout the controller would hand the plugin. Only the
// canary strategy matters to the plugin; the selector and pod template a real
// Rollout needs are left out.
// headerRouteName is the rule the demo's setHeaderRoute step adds.
const headerRouteName = "canary-testers"

// headerMatch sends requests with X-Canary: yes to the canary.
func headerMatch() []v1alpha1.HeaderRoutingMatch {
	return []v1alpha1.HeaderRoutingMatch{{HeaderName: "X-Canary", HeaderValue: &v1alpha1.StringMatch{Exact: "yes"}}}
}

func demoRollout() *v1alpha1.Rollout {
	pause := intstr.FromString("30s")
	return &v1alpha1.Rollout{
		TypeMeta:   metav1.TypeMeta{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout"},
		ObjectMeta: metav1.ObjectMeta{Name: "rollouts-demo", Namespace: namespace},
		Spec: v1alpha1.RolloutSpec{Strategy: v1alpha1.RolloutStrategy{Canary: &v1alpha1.CanaryStrategy{
			StableService: stableSvc,
			CanaryService: canarySvc,
			TrafficRouting: &v1alpha1.RolloutTrafficRouting{
				Plugins:       map[string]json.RawMessage{pluginName: json.RawMessage(`{"httpRoute": "` + routeName + `"}`)},
				ManagedRoutes: []v1alpha1.MangedRoutes{{Name: headerRouteName}},
			},
			Steps: []v1alpha1.CanaryStep{
				{SetWeight: ptr(int32(10))},
				{Experiment: &v1alpha1.RolloutExperimentStep{Duration: "10m", Templates: []v1alpha1.RolloutExperimentTemplate{
					{Name: "baseline", SpecRef: v1alpha1.StableSpecRef, Weight: ptr(int32(5)), Service: &v1alpha1.TemplateService{}},
					{Name: "canary", SpecRef: v1alpha1.CanarySpecRef, Weight: ptr(int32(25)), Service: &v1alpha1.TemplateService{}},
				}}},
				{Pause: &v1alpha1.RolloutPause{}},
				{SetWeight: ptr(int32(50))},
				{SetHeaderRoute: &v1alpha1.SetHeaderRoute{Name: headerRouteName, Match: headerMatch()}},
				{Pause: &v1alpha1.RolloutPause{Duration: &pause}},
			},
		}}},
	}
}

func ptr[T any](v T) *T { return &v }

// showRollout prints the part of the Rollout that configures the plugin, as
// a user would write it.
func (d *demo) showRollout() error {
	snippet := map[string]any{
		"apiVersion": d.rollout.APIVersion,
		"kind":       d.rollout.Kind,
		"metadata":   map[string]string{"name": d.rollout.Name, "namespace": d.rollout.Namespace},
		"spec":       map[string]any{"strategy": d.rollout.Spec.Strategy},
	}
	text, err := yaml.Marshal(snippet)
	if err != nil {
		return fmt.Errorf("printing the Rollout: %w", err)
	}
	d.title("The Rollout")
	fmt.Fprintln(d.out, "The demo plays the Argo Rollouts controller for this Rollout (selector and pod")
	fmt.Fprintln(d.out, "template left out). The plugin reads its config under the name it is registered")
	fmt.Fprintf(d.out, "with in argo-rollouts-config, %q:\n\n", pluginName)
	fmt.Fprint(d.out, indent(string(text), "    "))
	return nil
}

// showInitialRoute prints the route as applied, before the plugin touched it.
func (d *demo) showInitialRoute() error {
	d.title("The route before the rollout")
	fmt.Fprintln(d.out, "As applied from the example file: all traffic to stable. kubectl owns every field.")
	route, err := d.route()
	if err != nil {
		return err
	}
	d.show(route)
	return nil
}

// walkCanary calls SetWeight as the controller does through the Rollout's
// steps and then the promotion.
func (d *demo) walkCanary() error {
	noWrites := 0
	steps := []struct {
		title, why string
		weight     int32
		wantWrites *int
	}{
		{"SetWeight(0)", "The Rollout gets a new revision. Until the first setWeight step the controller asks\nfor weight 0 (and it repeats its call on every reconcile). The route already sends\neverything to stable, so the plugin must send nothing.", 0, &noWrites},
		{"SetWeight(10)", "Step `setWeight: 10`: one apply moves 10% to the canary and adds the in-progress\nlabel. The plugin now owns spec.rules (atomic list: whoever applies it owns all of it).", 10, nil},
		{"SetWeight(50)", "Someone promotes the paused rollout (kubectl argo rollouts promote rollouts-demo);\nthe next step is `setWeight: 50`.", 50, nil},
		{"SetWeight(100)", "Every step is done: the controller sends all traffic to the canary before it makes\nthe new revision stable.", 100, nil},
		{"SetWeight(0)", "Promotion: the canary's pods are now behind the stable Service, so the controller\nsends everything to stable again. The in-progress label goes away, and the plugin\ngives spec.rules back with one Update that keeps every value: nobody owns them now,\nso a GitOps tool sees every difference again.", 0, nil},
	}
	for _, s := range steps {
		if err := d.setWeight(s.title, s.why, s.weight, s.wantWrites); err != nil {
			return err
		}
		if s.weight == 10 {
			if err := d.experimentStep(); err != nil {
				return err
			}
		}
		if s.weight == 50 {
			if err := d.headerRoute(); err != nil {
				return err
			}
		}
	}
	return nil
}

// experimentStep runs an experiment step with weighted baseline and canary
// templates (the GKE case: canary 10 stays, baseline 5, experiment canary 25,
// stable 60), then the end of the experiment, which takes their backends away.
func (d *demo) experimentStep() error {
	for _, call := range []struct {
		title, why string
		dests      []v1alpha1.WeightDestination
		want       map[string]int64
	}{
		{"SetWeight(10, baseline=5, canary=25)", "An experiment step runs a baseline and a canary template with weights 5 and 25: the\ncontroller passes their Services as additionalDestinations. The plugin adds a backendRef\nfor each to the managed rule and records them in its annotation; stable gets the rest.",
			[]v1alpha1.WeightDestination{{ServiceName: "rollouts-demo-exp-baseline", Weight: 5}, {ServiceName: "rollouts-demo-exp-canary", Weight: 25}},
			map[string]int64{stableSvc: 60, canarySvc: 10, "rollouts-demo-exp-baseline": 5, "rollouts-demo-exp-canary": 25}},
		{"SetWeight(10)", "The experiment ends: no additionalDestinations. Exactly the backendRefs the plugin added\nleave the route.", nil,
			map[string]int64{stableSvc: 90, canarySvc: 10}},
	} {
		if err := d.interrupted(); err != nil {
			return err
		}
		d.step++
		d.title(fmt.Sprintf("Step %d: %s", d.step, call.title))
		fmt.Fprintln(d.out, call.why)
		d.cluster.Recorder.Reset()
		if e := d.plugin.Plugin.SetWeight(d.rollout, 10, call.dests); e.HasError() {
			return fmt.Errorf("%s returned an error: %s", call.title, e.ErrorString)
		}
		route, err := d.route()
		if err != nil {
			return err
		}
		fmt.Fprintf(d.out, "\nplugin writes:    %s\n", describeWrites(d.cluster.Recorder.Writes()))
		d.show(route)
		if got := weights(route); !mapsEqual(got, call.want) {
			return fmt.Errorf("after %s the route's weights are %s, want %s", call.title, formatWeights(got), formatWeights(call.want))
		}
	}
	return nil
}

// headerRoute runs the Rollout's setHeaderRoute step and then, as the
// controller does at the end of the steps, RemoveManagedRoutes.
func (d *demo) headerRoute() error {
	for _, call := range []struct {
		title, why string
		run        func() (string, error)
	}{
		{"SetHeaderRoute(canary-testers)", "Step `setHeaderRoute`: a rule named canary-testers, a copy of the managed rule with the\nheader match X-Canary: yes, sends those requests to the canary only. It is recorded in the\nplugin's annotation, so only this rule, found by name, is ever removed.", func() (string, error) {
			return d.plugin.Plugin.SetHeaderRoute(d.rollout, &v1alpha1.SetHeaderRoute{Name: headerRouteName, Match: headerMatch()}).ErrorString, nil
		}},
		{"RemoveManagedRoutes", "The steps are done: the controller removes every rule listed in managedRoutes.", func() (string, error) {
			return d.plugin.Plugin.RemoveManagedRoutes(d.rollout).ErrorString, nil
		}},
	} {
		if err := d.interrupted(); err != nil {
			return err
		}
		d.step++
		d.title(fmt.Sprintf("Step %d: %s", d.step, call.title))
		fmt.Fprintln(d.out, call.why)
		d.cluster.Recorder.Reset()
		if msg, _ := call.run(); msg != "" {
			return fmt.Errorf("%s returned an error: %s", call.title, msg)
		}
		route, err := d.route()
		if err != nil {
			return err
		}
		fmt.Fprintf(d.out, "\nplugin writes:    %s\n", describeWrites(d.cluster.Recorder.Writes()))
		fmt.Fprintf(d.out, "rules:            %s\n", strings.Join(ruleSummaries(route), "; "))
		d.show(route)
	}
	return nil
}

// ruleSummaries says, per rule, its name, header matches and backends.
func ruleSummaries(route *unstructured.Unstructured) []string {
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	var out []string
	for i, r := range rules {
		rule := r.(map[string]any)
		name, _ := rule["name"].(string)
		if name == "" {
			name = fmt.Sprintf("#%d", i)
		}
		var headers, backends []string
		matches, _, _ := unstructured.NestedSlice(rule, "matches")
		for _, m := range matches {
			hs, _, _ := unstructured.NestedSlice(m.(map[string]any), "headers")
			for _, h := range hs {
				hm := h.(map[string]any)
				headers = append(headers, fmt.Sprintf("%v: %v", hm["name"], hm["value"]))
			}
		}
		refs, _, _ := unstructured.NestedSlice(rule, "backendRefs")
		for _, ref := range refs {
			m := ref.(map[string]any)
			backends = append(backends, fmt.Sprintf("%v=%v", m["name"], m["weight"]))
		}
		s := name + " → " + strings.Join(backends, " ")
		if len(headers) > 0 {
			s = name + " [" + strings.Join(headers, ", ") + "] → " + strings.Join(backends, " ")
		}
		out = append(out, s)
	}
	return out
}

// anotherOwnerEdits changes the route as someone else would mid-rollout, and
// shows the plugin keeps that change: it builds every apply from the live
// route and changes only the two weights.
func (d *demo) anotherOwnerEdits() error {
	if err := d.interrupted(); err != nil {
		return err
	}
	d.step++
	d.title(fmt.Sprintf("Step %d: another owner edits the route", d.step))
	fmt.Fprintf(d.out, "Someone runs `kubectl edit` (an Update, field manager \"kubectl-edit\") and adds the\nhostname %s. The plugin is not involved.\n\n", editedHostname)
	routes := d.cluster.Gateway.GatewayV1().HTTPRoutes(namespace)
	route, err := routes.Get(d.ctx, routeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading HTTPRoute %s/%s to edit it: %w", namespace, routeName, err)
	}
	route.Spec.Hostnames = append(route.Spec.Hostnames, gwv1.Hostname(editedHostname))
	if _, err := routes.Update(d.ctx, route, metav1.UpdateOptions{FieldManager: "kubectl-edit"}); err != nil {
		return fmt.Errorf("editing HTTPRoute %s/%s as kubectl-edit: %w", namespace, routeName, err)
	}
	after, err := d.route()
	if err != nil {
		return err
	}
	d.show(after)

	if err := d.setWeight("SetWeight(30)", "The next rollout starts with `setWeight: 30`. The plugin applies the rules built from\nthe live route, so the new hostname stays, and changes only the two weights.", 30, nil); err != nil {
		return err
	}
	if err := d.checkHostname(); err != nil {
		return err
	}
	if err := d.gitopsConflict(); err != nil {
		return err
	}
	// Argo CD's sync also put Git's hostnames back: that is its call, not the plugin's.
	return d.setWeight("SetWeight(0)", "The user aborts that rollout: all traffic back to stable. That is what Git says too,\nso the plugin does not fight anyone; it gives up its ownership again.", 0, nil)
}

// gitopsConflict plays Argo CD syncing the route from Git mid-rollout (a
// forced server-side apply of stable 100 / canary 0) and shows that the
// plugin's next step fails with an error naming Argo CD instead of writing
// the rollout's weights over Git's.
func (d *demo) gitopsConflict() error {
	if err := d.interrupted(); err != nil {
		return err
	}
	d.step++
	d.title(fmt.Sprintf("Step %d: Argo CD syncs the route from Git mid-rollout", d.step))
	fmt.Fprintln(d.out, "Argo CD applies the route from Git with force (field manager \"argocd-controller\"):\nstable 100, canary 0. It now owns spec.rules.")
	data, err := os.ReadFile(filepath.Join(harness.RepoRoot(), "docs", "examples", "demo.yaml"))
	if err != nil {
		return err
	}
	objs, err := decodeObjects(data)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if obj.GetKind() != "HTTPRoute" {
			continue
		}
		body, err := json.Marshal(obj.Object)
		if err != nil {
			return err
		}
		force := true
		if _, err := d.dyn.Resource(routes.HTTPRoute.GVR("v1")).Namespace(namespace).
			Patch(d.ctx, routeName, types.ApplyPatchType, body, metav1.PatchOptions{FieldManager: "argocd-controller", Force: &force}); err != nil {
			return fmt.Errorf("applying the Git route as argocd-controller: %w", err)
		}
	}
	route, err := d.route()
	if err != nil {
		return err
	}
	d.show(route)

	d.step++
	d.title(fmt.Sprintf("Step %d: SetWeight(50) after Argo CD's sync", d.step))
	fmt.Fprintln(d.out, "The rollout's next step is `setWeight: 50`. The plugin sees that someone else changed\nthe weights it set and would have to change them back: it writes nothing and answers\nwith an error the Rollout shows (conflictPolicy: Force would let it take over).")
	d.cluster.Recorder.Reset()
	rpcErr := d.plugin.Plugin.SetWeight(d.rollout, 50, nil)
	if !rpcErr.HasError() {
		return fmt.Errorf("SetWeight(50) after Argo CD's sync succeeded; want a conflict error")
	}
	if n := len(d.cluster.Recorder.Writes()); n != 0 {
		return fmt.Errorf("SetWeight(50) after Argo CD's sync sent %d writes, want none", n)
	}
	fmt.Fprintf(d.out, "\nplugin error:     %s\n", rpcErr.ErrorString)
	route, err = d.route()
	if err != nil {
		return err
	}
	d.show(route)
	return nil
}

func (d *demo) checkHostname() error {
	route, err := d.route()
	if err != nil {
		return err
	}
	if !slices.Contains(hostnames(route), editedHostname) {
		return fmt.Errorf("HTTPRoute %s/%s lost the hostname %s that kubectl-edit added: hostnames are %v",
			namespace, routeName, editedHostname, hostnames(route))
	}
	return nil
}

// setWeight runs one SetWeight call through the plugin and shows the route
// afterwards. It fails if the call fails, if the weights on the route are not
// what the call asked for, or (with wantWrites) if the plugin sent a
// different number of writes.
func (d *demo) setWeight(title, why string, weight int32, wantWrites *int) error {
	if err := d.interrupted(); err != nil {
		return err
	}
	d.step++
	d.title(fmt.Sprintf("Step %d: %s", d.step, title))
	fmt.Fprintln(d.out, why)

	// Only the plugin talks to the apiserver through the recorder, so what it
	// records between Reset and now is exactly this call's requests.
	d.cluster.Recorder.Reset()
	if rpcErr := d.plugin.Plugin.SetWeight(d.rollout, weight, nil); rpcErr.HasError() {
		return fmt.Errorf("%s returned an error: %s", title, rpcErr.ErrorString)
	}
	writes := d.cluster.Recorder.Writes()

	route, err := d.route()
	if err != nil {
		return err
	}
	fmt.Fprintf(d.out, "\nplugin writes:    %s\n", describeWrites(writes))
	d.show(route)

	if wantWrites != nil && len(writes) != *wantWrites {
		return fmt.Errorf("%s sent %d writes, want %d", title, len(writes), *wantWrites)
	}
	want := map[string]int64{stableSvc: int64(100 - weight), canarySvc: int64(weight)}
	if got := weights(route); !mapsEqual(got, want) {
		return fmt.Errorf("after %s the route's weights are %s, want %s", title, formatWeights(got), formatWeights(want))
	}
	return nil
}

// route reads the demo route as stored, straight from the apiserver (not
// through the recorder, so the demo's reads never count as the plugin's).
func (d *demo) route() (*unstructured.Unstructured, error) {
	gvr := routes.HTTPRoute.GVR("v1")
	u, err := d.dyn.Resource(gvr).Namespace(namespace).Get(d.ctx, routeName, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("reading HTTPRoute %s/%s: %w", namespace, routeName, err)
	}
	return u, nil
}

// show prints the parts of the route the plugin's contract is about.
func (d *demo) show(route *unstructured.Unstructured) {
	rv := route.GetResourceVersion()
	switch {
	case d.lastRV == "":
		fmt.Fprintf(d.out, "resourceVersion:  %s\n", rv)
	case d.lastRV == rv:
		fmt.Fprintf(d.out, "resourceVersion:  %s (unchanged: the route was not written)\n", rv)
	default:
		fmt.Fprintf(d.out, "resourceVersion:  %s -> %s\n", d.lastRV, rv)
	}
	d.lastRV = rv
	fmt.Fprintf(d.out, "backendRefs:      %s\n", formatWeights(weights(route)))
	fmt.Fprintf(d.out, "hostnames:        %s\n", strings.Join(hostnames(route), ", "))
	fmt.Fprintf(d.out, "labels:           %s\n", formatLabels(route.GetLabels()))

	entries := managedFields(route)
	fmt.Fprintf(d.out, "spec.rules owner: %s\n", rulesOwners(entries))
	fmt.Fprintln(d.out, "managedFields:")
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  MANAGER\tOPERATION\tOWNED FIELDS")
	for _, e := range entries {
		for i, path := range e.paths {
			if i == 0 {
				fmt.Fprintf(tw, "  %s\t%s\t%s\n", e.manager, e.operation, path)
			} else {
				fmt.Fprintf(tw, "  \t\t%s\n", path)
			}
		}
	}
	tw.Flush()
}

// describeWrites says how many writes the plugin sent and of what kind, so a
// reader sees they are server-side applies.
func describeWrites(writes []harness.Request) string {
	if len(writes) == 0 {
		return "0"
	}
	var kinds []string
	for _, w := range writes {
		kind := w.Method + " " + w.ContentType
		switch {
		case w.IsApply():
			kind = "server-side apply"
		case w.Method == http.MethodPut:
			kind = "update"
		}
		kinds = append(kinds, kind)
	}
	return fmt.Sprintf("%d (%s)", len(writes), strings.Join(kinds, ", "))
}

// weights maps backend name to weight over every rule of the route.
// weights are the backendRef weights of the route's first rule, the one the
// rollout shifts (a header rule the plugin adds comes after it).
func weights(route *unstructured.Unstructured) map[string]int64 {
	out := map[string]int64{}
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	for _, rule := range rules[:min(1, len(rules))] {
		refs, _, _ := unstructured.NestedSlice(rule.(map[string]any), "backendRefs")
		for _, ref := range refs {
			m, _ := ref.(map[string]any)
			name, _ := m["name"].(string)
			w, _ := m["weight"].(int64)
			out[name] = w
		}
	}
	return out
}

// formatWeights prints stable first, then canary, then anything else sorted.
func formatWeights(w map[string]int64) string {
	names := make([]string, 0, len(w))
	for name := range w {
		names = append(names, name)
	}
	rank := func(n string) int {
		switch n {
		case stableSvc:
			return 0
		case canarySvc:
			return 1
		}
		return 2
	}
	sort.Slice(names, func(i, j int) bool {
		if rank(names[i]) != rank(names[j]) {
			return rank(names[i]) < rank(names[j])
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%s=%d", n, w[n])
	}
	return strings.Join(parts, "  ")
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func hostnames(route *unstructured.Unstructured) []string {
	h, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
	return h
}

func formatLabels(labels map[string]string) string {
	if len(labels) == 0 {
		return "(none)"
	}
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + labels[k]
	}
	return strings.Join(parts, ", ")
}

// fieldOwner is one managedFields entry, reduced to what a reader needs.
type fieldOwner struct {
	manager, operation string
	paths              []string
}

func managedFields(route *unstructured.Unstructured) []fieldOwner {
	var out []fieldOwner
	for _, e := range route.GetManagedFields() {
		var paths []string
		if e.FieldsV1 != nil {
			paths = ownedPaths(e.FieldsV1.GetRawBytes())
		}
		if e.Subresource != "" {
			e.Manager += " (" + e.Subresource + ")"
		}
		out = append(out, fieldOwner{manager: e.Manager, operation: string(e.Operation), paths: paths})
	}
	return out
}

// maxPathDepth keeps a path short: deep enough to name one label, and every
// field of a route's spec (all its lists are atomic, so ownership ends there).
const maxPathDepth = 3

// ownedPaths flattens a managedFields entry's fieldsV1 tree into dotted paths
// such as f:spec.f:rules. A "." key marks ownership of the parent object
// itself and adds nothing a reader needs, so it is left out.
func ownedPaths(raw []byte) []string {
	var tree map[string]any
	if err := json.Unmarshal(raw, &tree); err != nil {
		return []string{"(unreadable fieldsV1: " + err.Error() + ")"}
	}
	var out []string
	var walk func(prefix string, node map[string]any, depth int)
	walk = func(prefix string, node map[string]any, depth int) {
		keys := make([]string, 0, len(node))
		for k := range node {
			if k != "." {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			path := k
			if prefix != "" {
				path = prefix + "." + k
			}
			child, _ := node[k].(map[string]any)
			if depth+1 >= maxPathDepth || !hasChildren(child) {
				out = append(out, path)
				continue
			}
			walk(path, child, depth+1)
		}
	}
	walk("", tree, 0)
	return out
}

func hasChildren(node map[string]any) bool {
	for k := range node {
		if k != "." {
			return true
		}
	}
	return false
}

// rulesOwners names the managers that own spec.rules: the field whose owner
// decides who may change the weights without a conflict.
func rulesOwners(entries []fieldOwner) string {
	var owners []string
	for _, e := range entries {
		if slices.Contains(e.paths, "f:spec.f:rules") {
			owners = append(owners, fmt.Sprintf("%s (%s)", e.manager, e.operation))
		}
	}
	if len(owners) == 0 {
		return "(no manager)"
	}
	return strings.Join(owners, ", ")
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

func relToRepo(path string) string {
	if rel, err := filepath.Rel(harness.RepoRoot(), path); err == nil {
		return rel
	}
	return path
}

func indent(text, prefix string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "")
}

package flux

import (
	"context"
	"fmt"
	"strings"
	"testing"

	kustomizev1 "github.com/fluxcd/kustomize-controller/api/v1"
	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/fluxcd/pkg/ssa/normalize"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/gitops/gitopstest"
)

// controllerName is kustomize-controller's field manager (its default
// --controller-name... the ControllerName of its reconciler).
const controllerName = "kustomize-controller"

// The Kustomization of docs/gitops.md, reconciled by Flux's apply code for
// each route kind while the plugin walks a rollout. Each step is an operation
// (a Git commit, a reconciliation, a SetWeight by the plugin), the plugin's
// answer, and the route's weights after it.
func TestKustomizationRecipe(t *testing.T) {
	var ks kustomizev1.Kustomization
	gitopstest.Recipe(t, "Kustomization", "shop", &ks)
	d := gitopstest.StartDriver(t)
	for _, k := range gitopstest.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			f := newFlux(t, &ks, d, k, "flux-"+strings.ToLower(k.Kind))
			outside := gitopstest.Git{Stable: 100, Canary: 0, OutsideRules: true}
			final := outside
			final.OtherRuleFilter = k.Rules
			later := final
			later.Stable, later.Canary = 90, 10
			steps := []step{
				{"Git's first commit is applied", commit(gitopstest.GitStart), reconcile{}, "", weights(100, 0)},
				{"the plugin sets 30 (rollout in progress)", nil, setWeight(30), "", weights(70, 30)},
				{"Flux reconciles mid-rollout: the rollout's weights stay", nil, reconcile{}, "", weights(70, 30)},
				{"Git changes a field outside spec.rules mid-rollout: it lands", commit(outside), reconcile{wantOutside: true}, "", weights(70, 30)},
				{"the plugin sets 50 after Flux's apply: no conflict", nil, setWeight(50), "", weights(50, 50)},
				{"Git changes spec.rules mid-rollout: held back", commit(later), reconcile{}, "", weights(50, 50)},
				{"the rollout ends: the plugin sets 0 and releases spec.rules", nil, setWeight(0), "", weights(100, 0)},
				{"Flux reconciles after the rollout: Git's rules land", nil, reconcile{wantGit: true}, "", weights(90, 10)},
			}
			f.run(steps)
		})
	}
}

// The same walk with a Kustomization that has no ignore rule (the defaults):
// every reconciliation puts Git's weights back, and the plugin's next step is
// a conflict error, every time, until the rollout is aborted. This is what
// the recipe is for; if Flux or the plugin ever behave otherwise, this test
// says the docs need a new look.
func TestKustomizationDefaults(t *testing.T) {
	var ks kustomizev1.Kustomization
	gitopstest.Recipe(t, "Kustomization", "shop", &ks)
	ks.Spec.Ignore = nil
	d := gitopstest.StartDriver(t)
	for _, k := range gitopstest.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			f := newFlux(t, &ks, d, k, "flux-defaults-"+strings.ToLower(k.Kind))
			conflict := "conflict: while rollout"
			f.run([]step{
				{"Git's first commit is applied", commit(gitopstest.GitStart), reconcile{}, "", weights(100, 0)},
				{"the plugin sets 30 (rollout in progress)", nil, setWeight(30), "", weights(70, 30)},
				{"Flux reconciles mid-rollout: Git's weights are back", nil, reconcile{}, "", weights(100, 0)},
				{"the plugin's next step is a conflict", nil, setWeight(50), conflict, weights(100, 0)},
				{"the controller retries: conflict again", nil, setWeight(50), conflict, weights(100, 0)},
				{"the rollout is aborted: back to 0, no conflict", nil, setWeight(0), "", weights(100, 0)},
			})
		})
	}
}

type step struct {
	what    string
	commit  *gitopstest.Git // a Git change before the operation, if any
	op      operation
	err     string // a substring of the plugin's error; "" for none
	weights [2]int64
}

func commit(g gitopstest.Git) *gitopstest.Git { return &g }

func weights(stable, canary int64) [2]int64 { return [2]int64{stable, canary} }

type operation interface {
	run(t *testing.T, f *flux) string // the plugin's error, if any
}

// reconcile is one reconciliation of the Kustomization: apply Git.
type reconcile struct {
	wantOutside bool // the change outside spec.rules must be live afterwards
	wantGit     bool // the live spec must be Git's exactly afterwards
}

func (r reconcile) run(t *testing.T, f *flux) string {
	f.reconcile()
	live := f.d.Live(t, f.k, f.ns)
	git := f.d.GitSpec(t, f.k, f.ns, f.git).(map[string]any)
	if r.wantGit {
		if diff := cmp.Diff(git, live.Object["spec"]); diff != "" {
			t.Errorf("%s %s/%s: Git's spec did not land (-git +live):\n%s", f.k.Kind, f.ns, gitopstest.RouteName, diff)
		}
		if left := gitopstest.Leftovers(live, f.d.FieldManager); len(left) > 0 {
			t.Errorf("%s %s/%s: after the rollout and Flux's apply the route still has %v", f.k.Kind, f.ns, gitopstest.RouteName, left)
		}
	}
	if r.wantOutside {
		field := "hostnames"
		if !f.k.Hostnames {
			field = "parentRefs"
		}
		if diff := cmp.Diff(git[field], live.Object["spec"].(map[string]any)[field]); diff != "" {
			t.Errorf("%s %s/%s: Git's %s did not land mid-rollout (-git +live):\n%s", f.k.Kind, f.ns, gitopstest.RouteName, field, diff)
		}
	}
	return ""
}

// setWeight is the Argo Rollouts controller's SetWeight call.
type setWeight int32

func (w setWeight) run(t *testing.T, f *flux) string { return f.d.SetWeight(t, f.ns, f.k, int32(w)) }

// flux is one Kustomization's view of one route.
type flux struct {
	t       *testing.T
	ks      *kustomizev1.Kustomization
	manager *ssa.ResourceManager
	d       *gitopstest.Driver
	k       gitopstest.Kind
	ns      string
	git     gitopstest.Git
}

func newFlux(t *testing.T, ks *kustomizev1.Kustomization, d *gitopstest.Driver, k gitopstest.Kind, ns string) *flux {
	c, err := client.New(d.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m := ssa.NewResourceManager(c, nil, ssa.Owner{Field: controllerName, Group: kustomizev1.GroupVersion.Group})
	return &flux{t: t, ks: ks, manager: m, d: d, k: k, ns: d.Namespace(t, ns)}
}

func (f *flux) run(steps []step) {
	t := f.t
	for i, s := range steps {
		where := fmt.Sprintf("step %d (%s), %s %s/%s", i+1, s.what, f.k.Kind, f.ns, gitopstest.RouteName)
		if s.commit != nil {
			f.git = *s.commit
		}
		errText := s.op.run(t, f)
		switch {
		case s.err == "" && errText != "":
			t.Errorf("%s: the plugin returned an error: %s", where, errText)
		case s.err != "" && !strings.Contains(errText, s.err):
			t.Errorf("%s: the plugin's answer %q does not say %q", where, errText, s.err)
		}
		live := f.d.Live(t, f.k, f.ns)
		if stable, canary := gitopstest.Weights(live); [2]int64{stable, canary} != s.weights {
			t.Errorf("%s: weights stable %d / canary %d, want %d / %d; spec.rules owned by %v",
				where, stable, canary, s.weights[0], s.weights[1], gitopstest.Owners(live))
		}
	}
}

// reconcile applies Git's route as kustomize-controller's apply does.
func (f *flux) reconcile() {
	t := f.t
	objects := []*unstructured.Unstructured{f.git.Route(f.k, f.ns)}
	f.manager.SetOwnerLabels(objects, f.ks.Name, f.ks.Namespace)
	if err := normalize.UnstructuredList(objects); err != nil {
		t.Fatal(err)
	}
	changes, err := f.manager.ApplyAllStaged(context.Background(), objects, applyOptions(f.ks))
	if err != nil {
		t.Fatalf("Flux's ApplyAllStaged of %s %s/%s: %v", f.k.Kind, f.ns, gitopstest.RouteName, err)
	}
	for _, e := range changes.Entries {
		t.Logf("flux: %s", e.String())
	}
}

// applyOptions are the options kustomize-controller v1.9.4 and v1.10.1 build
// for a Kustomization (their apply function), with the controller's default
// flags: no disallowed field managers, no managers overridden before the dry
// run, no custom stage kinds.
func applyOptions(ks *kustomizev1.Kustomization) ssa.ApplyOptions {
	group := kustomizev1.GroupVersion.Group
	opts := ssa.DefaultApplyOptions()
	opts.Force = ks.Spec.Force
	opts.ExclusionSelector = map[string]string{
		group + "/reconcile": kustomizev1.DisabledValue,
		group + "/ssa":       kustomizev1.IgnoreValue,
	}
	opts.IfNotPresentSelector = map[string]string{group + "/ssa": kustomizev1.IfNotPresentValue}
	opts.ForceSelector = map[string]string{group + "/force": kustomizev1.EnabledValue}
	for _, rule := range ks.Spec.Ignore {
		r := jsondiff.IgnoreRule{Paths: rule.Paths}
		if s := rule.Target; s != nil {
			r.Selector = &jsondiff.Selector{Group: s.Group, Version: s.Version, Kind: s.Kind, Name: s.Name,
				Namespace: s.Namespace, AnnotationSelector: s.AnnotationSelector, LabelSelector: s.LabelSelector}
		}
		opts.DriftIgnoreRules = append(opts.DriftIgnoreRules, r)
	}
	opts.Cleanup = ssa.ApplyCleanupOptions{
		Annotations: []string{corev1.LastAppliedConfigAnnotation, "kustomize.toolkit.fluxcd.io/checksum", "fluxcd.io/sync-checksum"},
		Labels:      []string{"fluxcd.io/sync-gc-mark"},
		FieldManagers: []ssa.FieldManager{
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationApply},
			{Name: "kubectl", OperationType: metav1.ManagedFieldsOperationUpdate},
			{Name: "before-first-apply", OperationType: metav1.ManagedFieldsOperationUpdate},
			{Name: controllerName, OperationType: metav1.ManagedFieldsOperationUpdate},
		},
		Exclusions: map[string]string{group + "/ssa": kustomizev1.MergeValue},
	}
	return opts
}

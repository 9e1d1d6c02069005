package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/argoproj/argo-cd/v3/common"
	"github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/argo"
	argodiff "github.com/argoproj/argo-cd/v3/util/argo/diff"
	"github.com/argoproj/argo-cd/v3/util/argo/normalizers"
	argokube "github.com/argoproj/argo-cd/v3/util/kube"
	gitopsdiff "github.com/argoproj/gitops-engine/pkg/diff"
	"github.com/argoproj/gitops-engine/pkg/utils/kube"
	"github.com/argoproj/gitops-engine/pkg/utils/tracing"
	jsonpatch "github.com/evanphx/json-patch"
	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/gatewayapi-ssa/rollouts-plugin/test/gitops/gitopstest"
)

// The Application of docs/gitops.md, run by Argo CD's diff code for each
// route kind while the plugin walks a rollout. Each step is an operation
// (a Git commit, a SetWeight by the plugin), then the sync status Argo CD
// computes, then, because the Application syncs automatically with
// self-heal, a sync when it is OutOfSync, then the route's weights.
//
// docs/gitops.md has two Applications that must both pass: "shop", keyed to
// the plugin's field manager, and "shop-by-label", keyed to its in-progress
// label (the recipe users of the argoproj-labs plugin have).
func TestApplicationRecipe(t *testing.T) {
	d := gitopstest.StartDriver(t)
	for _, name := range []string{"shop", "shop-by-label"} {
		t.Run(name, func(t *testing.T) {
			var app v1alpha1.Application
			gitopstest.Recipe(t, "Application", name, &app)
			walkApplication(t, d, &app)
		})
	}
}

func walkApplication(t *testing.T, d *gitopstest.Driver, app *v1alpha1.Application) {
	schema, parser, err := (&kube.KubectlCmd{Log: logr.Discard(), Tracer: tracing.NopTracer{}}).LoadOpenAPISchema(d.Config)
	if err != nil {
		t.Fatalf("loading the apiserver's OpenAPI schema as Argo CD does: %v", err)
	}
	var dryRunner gitopsdiff.ServerSideDryRunner
	if serverSideDiff(app) {
		applier, cleanup, err := argokube.ManageServerSideDiffDryRuns(d.Config, schema, func(string) (kube.CleanupFunc, error) { return func() {}, nil })
		if err != nil {
			t.Fatalf("Argo CD's server-side diff dry-run applier: %v", err)
		}
		defer cleanup()
		dryRunner = gitopsdiff.NewK8sServerSideDryRunner(applier)
	}
	for _, k := range gitopstest.Kinds {
		t.Run(k.Kind, func(t *testing.T) {
			a := newArgoCD(t, app, parser, dryRunner, d, k)
			outside := gitopstest.Git{Stable: 100, Canary: 0, OutsideRules: true}
			filter := outside
			filter.OtherRuleFilter = true
			final := outside
			if k.Rules {
				final = filter
			}
			later := final
			later.Stable, later.Canary = 90, 10
			steps := []step{
				{"Git's first commit", commit(gitopstest.GitStart), OutOfSync, weights(100, 0)},
				{"nothing changed", nothing{}, Synced, weights(100, 0)},
				{"the plugin sets 30 (rollout in progress)", setWeight(30), Synced, weights(70, 30)},
				{"Git changes a field outside spec.rules mid-rollout", commit(outside), OutOfSync, weights(70, 30)},
				{"the plugin sets 50 after Argo CD's sync", setWeight(50), Synced, weights(50, 50)},
			}
			if k.Rules {
				steps = append(steps,
					step{"Git adds a filter to another rule mid-rollout: hidden until the rollout ends", commit(filter), Synced, weights(50, 50)})
			}
			// When the rollout ends the plugin gives spec.rules back, so a
			// change to another rule made in Git during the rollout shows now.
			end := Synced
			if k.Rules {
				end = OutOfSync
			}
			steps = append(steps,
				step{"the rollout ends: the plugin sets 0 and releases spec.rules", setWeight(0), end, weights(100, 0)},
				step{"nothing changed after the rollout", nothing{}, Synced, weights(100, 0)},
				step{"Git changes the weights after the rollout", commit(later), OutOfSync, weights(90, 10)},
				step{"nothing changed", nothing{}, Synced, weights(90, 10)},
			)
			a.run(steps)
			live := d.Live(t, k, a.ns)
			if diff := cmp.Diff(d.GitSpec(t, k, a.ns, later), live.Object["spec"]); diff != "" {
				t.Errorf("%s %s/%s: spec after the last sync differs from Git (-git +live):\n%s", k.Kind, a.ns, gitopstest.RouteName, diff)
			}
			if left := gitopstest.Leftovers(live, d.FieldManager); len(left) > 0 {
				t.Errorf("%s %s/%s: after the rollout and Argo CD's syncs the route still has %v", k.Kind, a.ns, gitopstest.RouteName, left)
			}
		})
	}
}

// Sync statuses as Argo CD shows them.
const (
	Synced    = "Synced"
	OutOfSync = "OutOfSync"
)

type step struct {
	what    string
	op      operation
	status  string // Argo CD's sync status right after the operation
	weights [2]int64
}

func weights(stable, canary int64) [2]int64 { return [2]int64{stable, canary} }

type operation interface {
	run(t *testing.T, a *argoCD) string // the plugin's error, if any
}

// commit is a change in Git: from now on Argo CD's target is this route.
type commit gitopstest.Git

func (c commit) run(t *testing.T, a *argoCD) string {
	a.git = gitopstest.Git(c)
	return ""
}

// setWeight is the Argo Rollouts controller's SetWeight call.
type setWeight int32

func (w setWeight) run(t *testing.T, a *argoCD) string {
	return a.d.SetWeight(t, a.ns, a.k, int32(w))
}

// nothing is a refresh with nothing changed.
type nothing struct{}

func (nothing) run(*testing.T, *argoCD) string { return "" }

// argoCD is one Application's view of one route.
type argoCD struct {
	t      *testing.T
	app    *v1alpha1.Application
	config argodiff.DiffConfig
	d      *gitopstest.Driver
	k      gitopstest.Kind
	ns     string
	git    gitopstest.Git
}

// serverSideDiff says whether Argo CD diffs this Application with a
// server-side dry-run apply: the controller's flag is off by default, the
// Application's compare-options annotation turns it on.
func serverSideDiff(app *v1alpha1.Application) bool {
	opts := app.GetAnnotations()[common.AnnotationCompareOptions]
	return strings.Contains(opts, "ServerSideDiff=true") && !strings.Contains(opts, "ServerSideDiff=false")
}

func newArgoCD(t *testing.T, app *v1alpha1.Application, parser *managedfields.GvkParser, dryRunner gitopsdiff.ServerSideDryRunner, d *gitopstest.Driver, k gitopstest.Kind) *argoCD {
	// As controller/state.go CompareAppState builds it, with the default
	// settings: status ignored for every kind, jq timeout 1 s, annotation
	// tracking, no diff cache; server-side diff if the Application asks for it.
	overrides := map[string]v1alpha1.ResourceOverride{"*/*": {IgnoreDifferences: v1alpha1.OverrideIgnoreDiff{JSONPointers: []string{"/status"}}}}
	b := argodiff.NewDiffConfigBuilder().
		WithDiffSettings(app.Spec.IgnoreDifferences, overrides, false, normalizers.IgnoreNormalizerOpts{JQExecutionTimeout: time.Second}).
		WithTracking("", string(v1alpha1.TrackingMethodAnnotation)).
		WithNoCache().
		WithGVKParser(parser).
		WithManager(common.ArgoCDSSAManager).
		WithServerSideDiff(dryRunner != nil)
	if dryRunner != nil {
		b.WithServerSideDryRunner(dryRunner)
	}
	if app.Spec.SyncPolicy != nil && app.Spec.SyncPolicy.SyncOptions.HasOption("ServerSideApply=true") {
		b.WithStructuredMergeDiff(true)
	}
	config, err := b.Build()
	if err != nil {
		t.Fatalf("Application %s: diff config: %v", app.Name, err)
	}
	return &argoCD{t: t, app: app, config: config, d: d, k: k, ns: d.Namespace(t, app.Name+"-"+strings.ToLower(k.Kind))}
}

func (a *argoCD) run(steps []step) {
	t := a.t
	for i, s := range steps {
		where := fmt.Sprintf("step %d (%s), %s %s/%s", i+1, s.what, a.k.Kind, a.ns, gitopstest.RouteName)
		if errText := s.op.run(t, a); errText != "" {
			t.Errorf("%s: the plugin returned an error: %s", where, errText)
		}
		status, diff := a.status()
		if status != s.status {
			t.Errorf("%s: Argo CD says %s, want %s (-live +Git as Argo CD would apply it):\n%s", where, status, s.status, diff)
		}
		if status == OutOfSync && a.app.Spec.SyncPolicy != nil && a.app.Spec.SyncPolicy.Automated != nil {
			a.sync()
			if after, diff := a.status(); after != Synced {
				t.Errorf("%s: still %s after the sync:\n%s", where, after, diff)
			}
		}
		live := a.d.Live(t, a.k, a.ns)
		if stable, canary := gitopstest.Weights(live); [2]int64{stable, canary} != s.weights {
			t.Errorf("%s: weights stable %d / canary %d, want %d / %d; spec.rules owned by %v",
				where, stable, canary, s.weights[0], s.weights[1], gitopstest.Owners(live))
		}
	}
}

// target is the route in Git as Argo CD renders it: with its tracking annotation.
func (a *argoCD) target() *unstructured.Unstructured {
	u := a.git.Route(a.k, a.ns)
	if err := argo.NewResourceTracking().SetAppInstance(u, "", a.app.Name, a.app.Namespace, v1alpha1.TrackingMethodAnnotation, ""); err != nil {
		a.t.Fatal(err)
	}
	return u
}

func (a *argoCD) live() *unstructured.Unstructured {
	u, err := a.d.Dynamic.Resource(a.k.GVR()).Namespace(a.ns).Get(context.Background(), gitopstest.RouteName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		a.t.Fatal(err)
	}
	return u
}

// status is the sync status Argo CD computes, and the difference it sees.
func (a *argoCD) status() (string, string) {
	live := a.live()
	if live == nil {
		return OutOfSync, "(no live object)"
	}
	res, err := argodiff.StateDiffs([]*unstructured.Unstructured{live}, []*unstructured.Unstructured{a.target()}, a.config)
	if err != nil {
		a.t.Fatalf("Argo CD's StateDiffs on %s %s/%s: %v", a.k.Kind, a.ns, gitopstest.RouteName, err)
	}
	r := res.Diffs[0]
	if !r.Modified {
		return Synced, ""
	}
	var before, after map[string]any
	_ = json.Unmarshal(r.NormalizedLive, &before)
	_ = json.Unmarshal(r.PredictedLive, &after)
	return OutOfSync, cmp.Diff(before, after)
}

// sync applies the target as Argo CD's sync does with ServerSideApply=true
// (server-side apply, force, manager argocd-controller). With
// RespectIgnoreDifferences=true the target first takes the live values of
// every ignored field, as controller/sync.go does: normalize both, then the
// merge patch from the normalized live to the live object goes onto the
// normalized target (routes are CRDs: a JSON merge patch).
func (a *argoCD) sync() {
	t := a.t
	target := a.target()
	live := a.live()
	if live != nil && a.app.Spec.SyncPolicy.SyncOptions.HasOption("RespectIgnoreDifferences=true") {
		n, err := argodiff.Normalize([]*unstructured.Unstructured{live}, []*unstructured.Unstructured{target}, a.config)
		if err != nil {
			t.Fatal(err)
		}
		normLive, _ := n.Lives[0].MarshalJSON()
		liveJSON, _ := live.MarshalJSON()
		normTarget, _ := n.Targets[0].MarshalJSON()
		patch, err := jsonpatch.CreateMergePatch(normLive, liveJSON)
		if err != nil {
			t.Fatal(err)
		}
		patched, err := jsonpatch.MergePatch(normTarget, patch)
		if err != nil {
			t.Fatal(err)
		}
		target = &unstructured.Unstructured{}
		if err := target.UnmarshalJSON(patched); err != nil {
			t.Fatal(err)
		}
	}
	// What kubectl apply --server-side sends: no status, no server-set metadata.
	unstructured.RemoveNestedField(target.Object, "status")
	for _, f := range []string{"managedFields", "resourceVersion", "uid", "creationTimestamp", "generation"} {
		unstructured.RemoveNestedField(target.Object, "metadata", f)
	}
	data, err := target.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	force := true
	if _, err := a.d.Dynamic.Resource(a.k.GVR()).Namespace(a.ns).Patch(context.Background(), gitopstest.RouteName, types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: common.ArgoCDSSAManager, Force: &force}); err != nil {
		t.Fatalf("Argo CD's sync of %s %s/%s: %v", a.k.Kind, a.ns, gitopstest.RouteName, err)
	}
}

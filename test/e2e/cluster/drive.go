package cluster

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/argoproj/argo-rollouts/pkg/apis/rollouts/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// RolloutsGVR is the resource of Argo Rollouts' Rollouts.
var RolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}

// RouteGVR is the Gateway API v1 resource of a route kind (HTTPRoute, TCPRoute, ...).
func RouteGVR(kind string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "gateway.networking.k8s.io", Version: "v1", Resource: strings.ToLower(kind) + "s"}
}

// CreateObjects creates the objects of a YAML stream in namespace ns, in
// order, under fieldManager. The resource is the kind's lower-case plural.
func (c *Cluster) CreateObjects(ctx context.Context, ns, objects, fieldManager string) error {
	return CreateObjects(ctx, c.Dynamic, ns, objects, fieldManager)
}

// CreateObjects creates the objects of a YAML stream with dyn, as
// Cluster.CreateObjects does (for the route cluster too).
func CreateObjects(ctx context.Context, dyn dynamic.Interface, ns, objects, fieldManager string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(objects), 4096)
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if err.Error() == "EOF" {
				return nil
			}
			return fmt.Errorf("decoding objects: %w", err)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		u.SetNamespace(ns)
		gvk := u.GroupVersionKind()
		gvr := gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s")
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, u, metav1.CreateOptions{FieldManager: fieldManager}); err != nil {
			return fmt.Errorf("creating %s %s: %w", gvk.Kind, u.GetName(), err)
		}
	}
}

// SetImage changes the image of the Rollout's first container with a JSON
// patch, as `kubectl argo rollouts set image` does (kubectl set image does
// not know the kind).
func (c *Cluster) SetImage(ctx context.Context, ns, name, image string) error {
	patch := fmt.Sprintf(`[{"op":"replace","path":"/spec/template/spec/containers/0/image","value":%q}]`, image)
	if _, err := c.Dynamic.Resource(RolloutsGVR).Namespace(ns).Patch(ctx, name, types.JSONPatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("setting image: %w", err)
	}
	return nil
}

// Promote does what `kubectl argo rollouts promote` does: unpause the spec if
// paused, then clear the pause conditions through the status subresource. A
// Rollout that is not paused is an error.
func (c *Cluster) Promote(ctx context.Context, ns, name string) error {
	ri := c.Dynamic.Resource(RolloutsGVR).Namespace(ns)
	ro, err := c.Rollout(ctx, ns, name)
	if err != nil {
		return err
	}
	if ro.Spec.Paused {
		if _, err := ri.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"paused":false}}`), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("promote (spec): %w", err)
		}
	}
	if len(ro.Status.PauseConditions) > 0 {
		if _, err := ri.Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"pauseConditions":null}}`), metav1.PatchOptions{}, "status"); err != nil {
			return fmt.Errorf("promote (status): %w", err)
		}
	} else if !ro.Spec.Paused {
		return fmt.Errorf("promote: the rollout is not paused:\n%s", DescribeRollout(ro))
	}
	return nil
}

// Abort does what `kubectl argo rollouts abort` does: status.abort = true.
func (c *Cluster) Abort(ctx context.Context, ns, name string) error {
	if _, err := c.Dynamic.Resource(RolloutsGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"status":{"abort":true}}`), metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("abort: %w", err)
	}
	return nil
}

// Rollout reads a Rollout.
func (c *Cluster) Rollout(ctx context.Context, ns, name string) (*v1alpha1.Rollout, error) {
	u, err := c.Dynamic.Resource(RolloutsGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	ro := &v1alpha1.Rollout{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ro); err != nil {
		return nil, err
	}
	return ro, nil
}

// Route reads a Gateway API v1 route of any kind.
func (c *Cluster) Route(ctx context.Context, ns, kind, name string) (*unstructured.Unstructured, error) {
	return c.Dynamic.Resource(RouteGVR(kind)).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
}

// Rule is one rule of a route, reduced to what a step checks.
type Rule struct {
	Name     string
	Headers  []string // "name=value" of every header match
	Backends []Backend
}

// Backend is one backendRef: its Service and weight (1 when unset).
type Backend struct {
	Name   string
	Weight int64
}

func (r Rule) String() string {
	var b []string
	for _, be := range r.Backends {
		b = append(b, fmt.Sprintf("%s=%d", be.Name, be.Weight))
	}
	s := "{" + strings.Join(b, " ") + "}"
	if r.Name != "" {
		s = r.Name + ":" + s
	}
	if len(r.Headers) > 0 {
		s = "[" + strings.Join(r.Headers, ",") + "]" + s
	}
	return s
}

// Rules reads spec.rules of any route kind.
func Rules(u *unstructured.Unstructured) []Rule {
	raw, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	var out []Rule
	for _, x := range raw {
		m, _ := x.(map[string]any)
		var r Rule
		r.Name, _, _ = unstructured.NestedString(m, "name")
		matches, _, _ := unstructured.NestedSlice(m, "matches")
		for _, mm := range matches {
			hs, _, _ := unstructured.NestedSlice(mm.(map[string]any), "headers")
			for _, h := range hs {
				hm := h.(map[string]any)
				r.Headers = append(r.Headers, fmt.Sprintf("%v=%v", hm["name"], hm["value"]))
			}
		}
		refs, _, _ := unstructured.NestedSlice(m, "backendRefs")
		for _, ref := range refs {
			rm := ref.(map[string]any)
			name, _, _ := unstructured.NestedString(rm, "name")
			w, found, _ := unstructured.NestedInt64(rm, "weight")
			if !found {
				w = 1
			}
			r.Backends = append(r.Backends, Backend{Name: name, Weight: w})
		}
		out = append(out, r)
	}
	return out
}

// Events lists the events of namespace ns matching fieldSelector ("" for
// all), oldest first.
func (c *Cluster) Events(ctx context.Context, ns, fieldSelector string) ([]corev1.Event, error) {
	events, err := c.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fieldSelector})
	if err != nil {
		return nil, err
	}
	items := events.Items
	sort.SliceStable(items, func(i, j int) bool { return EventTime(items[i]).Before(EventTime(items[j])) })
	return items, nil
}

// EventTime is when an event last happened.
func EventTime(e corev1.Event) time.Time {
	if !e.LastTimestamp.IsZero() {
		return e.LastTimestamp.Time
	}
	return e.EventTime.Time
}

// RolloutWant is a state of a Rollout; zero fields are not checked.
type RolloutWant struct {
	// Phase is status.phase (Healthy, Paused, Degraded, Progressing).
	Phase string
	// StepIndex is status.currentStepIndex.
	StepIndex *int32
	// Promoted: status.stableRS equals status.currentPodHash.
	Promoted bool
	// Aborted: status.abort is true.
	Aborted bool
}

// Mismatches lists how ro differs from w; empty when w is reached. Status
// written for an older spec (before the last action) is always a mismatch.
func (w RolloutWant) Mismatches(ro *v1alpha1.Rollout) []string {
	var out []string
	if ro.Status.ObservedGeneration != strconv.FormatInt(ro.Generation, 10) {
		out = append(out, fmt.Sprintf("status.observedGeneration %q, generation %d", ro.Status.ObservedGeneration, ro.Generation))
	}
	if w.Phase != "" && string(ro.Status.Phase) != w.Phase {
		out = append(out, fmt.Sprintf("phase %s, want %s", ro.Status.Phase, w.Phase))
	}
	if w.StepIndex != nil && (ro.Status.CurrentStepIndex == nil || *ro.Status.CurrentStepIndex != *w.StepIndex) {
		out = append(out, fmt.Sprintf("step index %v, want %d", deref(ro.Status.CurrentStepIndex), *w.StepIndex))
	}
	if w.Promoted && (ro.Status.StableRS == "" || ro.Status.StableRS != ro.Status.CurrentPodHash) {
		out = append(out, fmt.Sprintf("not promoted: stableRS %q, currentPodHash %q", ro.Status.StableRS, ro.Status.CurrentPodHash))
	}
	if w.Aborted && !ro.Status.Abort {
		out = append(out, "status.abort is not true")
	}
	return out
}

func deref(p *int32) any {
	if p == nil {
		return "nil"
	}
	return *p
}

// DescribeRollout is a Rollout's status in a few indented lines.
func DescribeRollout(ro *v1alpha1.Rollout) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  rollout: phase=%s message=%q step=%v stableRS=%s currentPodHash=%s abort=%v paused=%v pauseConditions=%d stablePingPong=%q\n",
		ro.Status.Phase, ro.Status.Message, deref(ro.Status.CurrentStepIndex), ro.Status.StableRS, ro.Status.CurrentPodHash, ro.Status.Abort,
		ro.Spec.Paused, len(ro.Status.PauseConditions), ro.Status.Canary.StablePingPong)
	if w := ro.Status.Canary.Weights; w != nil {
		fmt.Fprintf(&b, "  status.canary.weights: stable=%d canary=%d additional=%v\n", w.Stable.Weight, w.Canary.Weight, w.Additional)
	}
	for _, c := range ro.Status.Conditions {
		fmt.Fprintf(&b, "  condition %s=%s %s: %s\n", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

// ErrNotReached is wrapped by Await's error when the time is up.
var ErrNotReached = errors.New("not reached")

// Await calls check every half second until it reports no problem. It fails
// when check returns an error, a process of the cluster dies, ctx ends, or
// timeout passes (ErrNotReached, with the last problem check reported).
func (c *Cluster) Await(ctx context.Context, timeout time.Duration, check func() (problem string, err error)) error {
	deadline := time.Now().Add(timeout)
	for {
		problem, err := check()
		if err != nil {
			return err
		}
		if problem == "" {
			return nil
		}
		if dead := c.Dead(); len(dead) > 0 {
			return fmt.Errorf("cluster process died: %s", strings.Join(dead, "; "))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w within %s: %s", ErrNotReached, timeout, problem)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// AwaitRollout waits until the Rollout reaches w (see Await) and returns it.
func (c *Cluster) AwaitRollout(ctx context.Context, ns, name string, w RolloutWant, timeout time.Duration) (*v1alpha1.Rollout, error) {
	var ro *v1alpha1.Rollout
	err := c.Await(ctx, timeout, func() (string, error) {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		var err error
		if ro, err = c.Rollout(rctx, ns, name); err != nil {
			return err.Error(), nil
		}
		return strings.Join(w.Mismatches(ro), "; "), nil
	})
	if err != nil && ro != nil {
		err = fmt.Errorf("Rollout %s/%s: %w\nlast seen:\n%s", ns, name, err, DescribeRollout(ro))
	}
	return ro, err
}

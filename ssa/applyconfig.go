package ssa

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/features"
	"k8s.io/client-go/rest"
	applyrequest "k8s.io/client-go/util/apply"
	gwv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"
	gwv1a2ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1alpha2"
	gwv1b1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1beta1"
	gateway "sigs.k8s.io/gateway-api/pkg/client/clientset/versioned"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube"
	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// kindApply is how the plugin writes one kind in one version: a new typed
// apply configuration of it, the JSON shape of that configuration (to write
// its JSON without it, shape.go) and the REST client of its group and
// version.
type kindApply struct {
	newConfig func() any
	object    *shape
	client    func(c gateway.Interface) rest.Interface
}

type kindVersion struct {
	kind    routes.Kind
	version string
}

func typedApply[AC any](client func(c gateway.Interface) rest.Interface) kindApply {
	return kindApply{newConfig: func() any { return new(AC) }, object: shapeOf(reflect.TypeFor[AC]()), client: client}
}

var (
	v1       = func(c gateway.Interface) rest.Interface { return c.GatewayV1().RESTClient() }
	v1beta1  = func(c gateway.Interface) rest.Interface { return c.GatewayV1beta1().RESTClient() }
	v1alpha2 = func(c gateway.Interface) rest.Interface { return c.GatewayV1alpha2().RESTClient() }
)

// applies lists every kind and version the plugin writes.
var applies = map[kindVersion]kindApply{
	{routes.HTTPRoute, "v1"}:       typedApply[gwv1ac.HTTPRouteApplyConfiguration](v1),
	{routes.HTTPRoute, "v1beta1"}:  typedApply[gwv1b1ac.HTTPRouteApplyConfiguration](v1beta1),
	{routes.GRPCRoute, "v1"}:       typedApply[gwv1ac.GRPCRouteApplyConfiguration](v1),
	{routes.GRPCRoute, "v1alpha2"}: typedApply[gwv1a2ac.GRPCRouteApplyConfiguration](v1alpha2),
	{routes.TCPRoute, "v1"}:        typedApply[gwv1ac.TCPRouteApplyConfiguration](v1),
	{routes.TCPRoute, "v1alpha2"}:  typedApply[gwv1a2ac.TCPRouteApplyConfiguration](v1alpha2),
	{routes.TLSRoute, "v1"}:        typedApply[gwv1ac.TLSRouteApplyConfiguration](v1),
	{routes.TLSRoute, "v1alpha2"}:  typedApply[gwv1a2ac.TLSRouteApplyConfiguration](v1alpha2),
	{routes.UDPRoute, "v1"}:        typedApply[gwv1ac.UDPRouteApplyConfiguration](v1),
	{routes.UDPRoute, "v1alpha2"}:  typedApply[gwv1a2ac.UDPRouteApplyConfiguration](v1alpha2),
}

// encode is the JSON the kind's typed apply configuration of obj would
// send, written straight from obj, when the shape vouches that the
// configuration carries obj exactly (and client-go would send JSON, not
// CBOR); otherwise false, and the full round trip of decodeLossless decides.
func (k kindApply) encode(obj map[string]any) ([]byte, bool) {
	if features.FeatureGates().Enabled(features.ClientsAllowCBOR) && features.FeatureGates().Enabled(features.ClientsPreferCBOR) {
		return nil, false
	}
	return k.object.encode(make([]byte, 0, 1024), obj)
}

// apply sends one server-side apply of d for the live route with opts,
// guarded by live's resourceVersion when it has one (Apply empties it for a
// write guarded by ownership), and returns the apiserver's answer (the route
// it stored and the whole object, which a release patches, each read when
// asked).
// It applies the kind's typed apply configuration; when that cannot carry
// the route's rules exactly (a field a newer Gateway API added, which the
// typed apply would delete), it applies the same object unstructured, with
// the same options, and says why in unstructured. repeatable says that
// sending it again cannot write twice: the transport may then repeat it
// (kubeclient.SafeToRepeat).
func (w *Writer) apply(ctx context.Context, live routes.Route, d Content, opts metav1.ApplyOptions, repeatable bool) (answer *kube.Answer, unstructuredWhy string, err error) {
	kv := kindVersion{live.Kind, live.Version}
	k, ok := applies[kv]
	if !ok {
		return nil, "", fmt.Errorf("writing %s in version %s is not supported", live.Kind, live.Version)
	}
	obj := applyObject(live, d)
	body, encoded := k.encode(obj)
	if encoded {
		if s, ok := w.sender(kv, k); ok {
			raw, err := s.apply(ctx, live.Ref, body, opts.ToPatchOptions(), repeatable)
			if err != nil {
				return nil, "", err
			}
			return answerOf(live.Ref, raw)
		}
	}
	if repeatable {
		// The requests below are client-go's: the mark goes on their context.
		ctx = kubeclient.SafeToRepeat(ctx)
	}
	var unrep *unrepresentableError
	req, err := k.request(w.client, obj, body, encoded)
	if !errors.As(err, &unrep) {
		if err != nil {
			return nil, "", err
		}
		// As the typed client's Apply sends it; its answer is not decoded
		// into the typed object: the plugin reads its resourceVersion, and
		// the route or the whole object (kube.Answer) only when something
		// needs them.
		req = req.Namespace(live.Namespace).Resource(live.Kind.Resource()).Name(live.Name)
		res := patchParams(req, opts.ToPatchOptions()).Do(ctx)
		if err := res.Error(); err != nil {
			return nil, "", err // the apiserver's Status, as Into reads it
		}
		raw, _ := res.Raw()
		return answerOf(live.Ref, raw)
	}
	plain, err := plainJSON(obj)
	if err != nil {
		return nil, "", err
	}
	answer, err = w.applyUnstructured(ctx, live, plain, opts)
	return answer, unrep.Reason, err
}

// applyUnstructured applies plain, the object of the apply as plain JSON,
// to the live route through the dynamic client, with opts, and returns the
// apiserver's answer.
func (w *Writer) applyUnstructured(ctx context.Context, live routes.Route, plain map[string]any, opts metav1.ApplyOptions) (*kube.Answer, error) {
	u, err := w.dyn.Resource(live.Kind.GVR(live.Version)).Namespace(live.Namespace).Apply(ctx, live.Name, &unstructured.Unstructured{Object: plain}, opts)
	if err != nil {
		return nil, err
	}
	stored, err := routes.FromUnstructuredNoCopy(u)
	if err != nil {
		return nil, fmt.Errorf("reading the apiserver's answer: %w", err)
	}
	return kube.Answered(stored, u), nil
}

// answerOf is the apiserver's answer raw to a typed apply of the route ref.
func answerOf(ref routes.Ref, raw []byte) (*kube.Answer, string, error) {
	answer, err := kube.AnswerOf(ref, raw)
	if err != nil {
		return nil, "", fmt.Errorf("reading the apiserver's answer: %w", err)
	}
	return answer, "", nil
}

// sender is the sender of the kind's group version (send.go), made once;
// false when the client is no REST client of client-go's (a fake).
func (w *Writer) sender(kv kindVersion, k kindApply) (*sender, bool) {
	w.sendersMu.Lock()
	defer w.sendersMu.Unlock()
	if s, ok := w.senders[kv]; ok {
		return s, s != nil
	}
	s, ok := senderFor(k.client(w.client))
	if w.senders == nil {
		w.senders = map[kindVersion]*sender{}
	}
	w.senders[kv] = s
	return s, ok
}

// request is the typed apply of obj: body, its JSON written straight, when
// encode wrote it (encoded), or else the typed configuration filled by the
// full round trip, which refuses rules the types cannot carry exactly
// (UnrepresentableError).
func (k kindApply) request(client gateway.Interface, obj map[string]any, body []byte, encoded bool) (*rest.Request, error) {
	if encoded {
		return k.client(client).Patch(types.ApplyYAMLPatchType).Body(body), nil
	}
	ac := k.newConfig()
	if err := decodeLossless(obj, ac, rulesOf); err != nil {
		return nil, err
	}
	return applyrequest.NewRequest(k.client(client), ac)
}

// applyObject is what the plugin applies to a route: the route's identity,
// the resourceVersion it was read at (the precondition; none when live has
// none), the plugin's labels and annotations and the desired rules.
func applyObject(live routes.Route, d Content) map[string]any {
	meta := map[string]any{"name": live.Name, "namespace": live.Namespace}
	if live.ResourceVersion != "" {
		meta["resourceVersion"] = live.ResourceVersion
	}
	if d.Labels != nil {
		meta["labels"] = d.Labels
	}
	if d.Annotations != nil {
		meta["annotations"] = d.Annotations
	}
	return map[string]any{
		"apiVersion": routes.Group + "/" + live.Version,
		"kind":       string(live.Kind),
		"metadata":   meta,
		"spec":       map[string]any{"rules": d.Rules},
	}
}

// plainJSON is obj in plain JSON values, as an unstructured object holds
// them; numbers keep their digits.
func plainJSON(obj map[string]any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out map[string]any
	return out, dec.Decode(&out)
}

// rulesOf finds spec.rules in the JSON form of a route.
func rulesOf(v any) []any {
	spec, _ := v.(map[string]any)["spec"].(map[string]any)
	rules, _ := spec["rules"].([]any)
	return rules
}

// decodeLossless fills into from v's JSON, and refuses what into's types
// cannot carry: a rule (as rulesOf finds them in the JSON form) that does not
// come back the same, or an unknown field anywhere. The error names every
// field of the rules the types would lose.
func decodeLossless(v any, into any, rulesOf func(any) []any) error {
	data, want, err := plainOf(v)
	if err != nil {
		return err
	}
	strict := json.NewDecoder(bytes.NewReader(data))
	strict.DisallowUnknownFields()
	strictErr := strict.Decode(into)
	decoded := into
	if strictErr != nil {
		// Decode again, keeping what the types know, to say what they do not.
		decoded = reflect.New(reflect.TypeOf(into).Elem()).Interface()
		if err := json.Unmarshal(data, decoded); err != nil {
			return &unrepresentableError{Reason: strictErr.Error()}
		}
	}
	_, got, err := plainOf(decoded)
	if err != nil {
		return err
	}
	var lost []string
	wantRules, gotRules := rulesOf(want), rulesOf(got)
	for i := range wantRules {
		var g any
		if i < len(gotRules) {
			g = gotRules[i]
		}
		lost = append(lost, lostFields(pruneEmpty(wantRules[i]), pruneEmpty(g), fmt.Sprintf("spec.rules[%d]", i))...)
	}
	switch {
	case len(lost) > 0:
		return &unrepresentableError{Reason: strings.Join(lost, ", ")}
	case strictErr != nil:
		return &unrepresentableError{Reason: strictErr.Error()}
	}
	return nil
}

// plainOf is v's JSON and the plain JSON values it decodes to.
func plainOf(v any) ([]byte, any, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, nil, err
	}
	var plain any
	if err := json.Unmarshal(data, &plain); err != nil {
		return nil, nil, err
	}
	return data, plain, nil
}

// lostFields lists the paths (below path) of what want holds and got does
// not hold the same.
func lostFields(want, got any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, _ := got.(map[string]any)
		var out []string
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if gv, ok := g[k]; ok {
				out = append(out, lostFields(w[k], gv, path+"."+k)...)
			} else {
				out = append(out, path+"."+k)
			}
		}
		return out
	case []any:
		g, _ := got.([]any)
		var out []string
		for i := range w {
			at := fmt.Sprintf("%s[%d]", path, i)
			if i < len(g) {
				out = append(out, lostFields(w[i], g[i], at)...)
			} else {
				out = append(out, at)
			}
		}
		return out
	}
	if !reflect.DeepEqual(want, got) {
		return []string{path}
	}
	return nil
}

// pruneEmpty drops null values and empty lists and objects, which the typed
// apply configurations omit and which mean the same as an absent field.
func pruneEmpty(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, e := range t {
			if p := pruneEmpty(e); p != nil {
				out[k] = p
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	case []any:
		if len(t) == 0 {
			return nil
		}
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = pruneEmpty(e)
		}
		return out
	}
	return v
}

// patchParams sets a patch's query parameters as the typed client's
// ParameterCodec writes them from the options (TestPatchParamsAsTheCodec),
// without the codec's conversion by reflection on every write.
func patchParams(req *rest.Request, o metav1.PatchOptions) *rest.Request {
	for name, values := range patchQuery(o) {
		for _, v := range values {
			req = req.Param(name, v)
		}
	}
	return req
}

// patchQuery is the query parameters of a patch with the options o, for
// patchParams and for the applies sent straight (send.go).
func patchQuery(o metav1.PatchOptions) url.Values {
	q := url.Values{}
	for _, d := range o.DryRun {
		q.Add("dryRun", d)
	}
	if o.Force != nil {
		q.Set("force", strconv.FormatBool(*o.Force))
	}
	if o.FieldManager != "" {
		q.Set("fieldManager", o.FieldManager)
	}
	if o.FieldValidation != "" {
		q.Set("fieldValidation", o.FieldValidation)
	}
	return q
}

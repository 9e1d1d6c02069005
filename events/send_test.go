package events

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	typedeventsv1 "k8s.io/client-go/kubernetes/typed/events/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/gatewayapi-ssa/rollouts-plugin/kube/kubetest"
)

// typedSink is the Events API through client-go's typed client: what the
// Recorder used before send.go, and what httpSink is compared with.
type typedSink struct {
	client typedeventsv1.EventsV1Interface
}

func (a typedSink) create(ctx context.Context, e *eventsv1.Event) (string, error) {
	made, err := a.client.Events(e.Namespace).Create(ctx, e, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return made.Name, nil
}

func (a typedSink) patch(ctx context.Context, namespace, name string, data []byte) error {
	_, err := a.client.Events(namespace).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	return err
}

// restRequestRetries is how often client-go's rest.Request sends a request
// again that was answered with a Retry-After in seconds.
const restRequestRetries = 10

// An Event sent straight (send.go) is the request client-go's typed client
// sends, and each answer reads the same, for a create and a patch: the
// Event, a Status refusal of each kind the Recorder tells apart (403, 429
// with and without Retry-After, 422, 400, 404, 409), refusals that are no
// Status, and a 2xx that is a failed Status. An answer with a Retry-After
// is sent once straight (the Recorder decides when to try again), and 11
// times by the typed client (rest.Request's own retries): the first request
// and the last answer of each are compared.
func TestHTTPSinkAsTheTypedClient(t *testing.T) {
	statusOf := func(code int, reason, message, details string) string {
		return `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"` + message + `","reason":"` + reason + `"` + details + `,"code":` + strconv.Itoa(code) + `}`
	}
	created := `{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"web.18a2b3c4d5e6f708","namespace":"shop","uid":"u1","resourceVersion":"7"},"eventTime":"2026-12-01T10:00:00.000000Z","reportingController":"argo","reportingInstance":"host/1","action":"SetWeight","reason":"WeightsChanged","regarding":{"kind":"HTTPRoute","namespace":"shop","name":"web"},"note":"n","type":"Normal"}`
	answers := map[string]kubetest.Canned{
		"stored":          {Code: 201, ContentType: "application/json", Body: created},
		"forbidden":       {Code: 403, ContentType: "application/json", Body: statusOf(403, "Forbidden", `events.events.k8s.io is forbidden: User \"x\" cannot create resource`, `,"details":{"group":"events.k8s.io","kind":"events"}`)},
		"throttled":       {Code: 429, ContentType: "application/json", Body: statusOf(429, "TooManyRequests", "too many requests", `,"details":{"retryAfterSeconds":3}`)},
		"throttled again": {Code: 429, ContentType: "text/plain; charset=utf-8", RetryAfter: "0", Body: "Too many requests, please try again later.\n"},
		"invalid":         {Code: 422, ContentType: "application/json", Body: statusOf(422, "Invalid", `Event.events.k8s.io \"web.1\" is invalid: note: Too long`, `,"details":{"name":"web.1","group":"events.k8s.io","kind":"Event"}`)},
		"bad request":     {Code: 400, ContentType: "application/json", Body: statusOf(400, "BadRequest", "the body of the request was in an unknown format", "")},
		"not found":       {Code: 404, ContentType: "application/json", Body: statusOf(404, "NotFound", `events.events.k8s.io \"web.1\" not found`, `,"details":{"name":"web.1","group":"events.k8s.io","kind":"events"}`)},
		"name taken":      {Code: 409, ContentType: "application/json", Body: statusOf(409, "AlreadyExists", `events.events.k8s.io \"web.1\" already exists`, "")},
		"unavailable":     {Code: 503, ContentType: "text/plain", Body: "apiserver is shutting down\n"},
		"unexpected":      {Code: 502, ContentType: "application/octet-stream", Body: "\x00\x01"},
		"not a status":    {Code: 500, ContentType: "application/json", Body: `{"kind":"Event","apiVersion":"events.k8s.io/v1"}`},
		"failed, 200":     {Code: 200, ContentType: "application/json", Body: `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"no","reason":"InternalError","code":500}`},
	}
	first := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	related := &corev1.ObjectReference{APIVersion: "argoproj.io/v1alpha1", Kind: "Rollout", Namespace: "shop", Name: "web"}
	event := func() *eventsv1.Event {
		return (&state{opts: Options{Controller: "argo rollouts/gatewayapi", Instance: "host/1"}}).build(&series{
			ev: Event{
				Regarding: corev1.ObjectReference{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute", Namespace: "shop", Name: "web", UID: "u1"},
				Related:   related, Type: corev1.EventTypeNormal, Reason: reasonWeightsChanged, Action: "SetWeight",
				Note: "rollout shop/web: SetWeight 20: weights \"stable\" 80, \"canary\" 20 — ü",
			},
			first: first, last: first.Add(time.Minute), count: 3,
		}, first.Add(time.Minute))
	}
	patch := seriesPatch(&series{count: 4, last: first.Add(2 * time.Minute)})
	for name, a := range answers {
		for _, verb := range []string{"create", "patch"} {
			t.Run(name+"/"+verb, func(t *testing.T) {
				url, requests := kubetest.Answering(t, a)
				cfg := &rest.Config{Host: url + "/prefix", UserAgent: "rollouts-gatewayapi-ssa/test", Timeout: 30 * time.Second}
				straight, err := newHTTPSink(cfg)
				if err != nil {
					t.Fatal(err)
				}
				typedCfg := rest.CopyConfig(cfg)
				typedCfg.RateLimiter = flowcontrol.NewFakeAlwaysRateLimiter()
				client, err := typedeventsv1.NewForConfig(typedCfg)
				if err != nil {
					t.Fatal(err)
				}
				send := func(s sink) (string, error) {
					ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
					defer cancel()
					if verb == "create" {
						return s.create(ctx, event())
					}
					return "", s.patch(ctx, "shop", "web.18a2b3c4d5e6f708", patch)
				}
				name1, err1 := send(straight)
				n := len(requests())
				name2, err2 := send(typedSink{client})
				seen := requests()
				typedWant := 1
				if a.RetryAfter != "" {
					typedWant = 1 + restRequestRetries
				}
				if n != 1 || len(seen)-n != typedWant {
					t.Fatalf("%d requests sent straight, %d by the typed client; want 1 and %d", n, len(seen)-n, typedWant)
				}
				// The typed client sends an Event in protobuf and asks for it
				// back: the Events are compared decoded, and the answers are
				// JSON, which it reads too.
				typedReq, straightReq := seen[n], seen[0]
				if verb == "create" {
					if straightReq.ContentType != "application/json" || typedReq.ContentType != "application/vnd.kubernetes.protobuf" {
						t.Errorf("Content-Type %q straight, %q by the typed client", straightReq.ContentType, typedReq.ContentType)
					}
					if diff := cmp.Diff(decodeEvent(t, typedReq.Body), decodeEvent(t, straightReq.Body)); diff != "" {
						t.Errorf("the Event sent straight differs from the typed client's (-typed +straight):\n%s", diff)
					}
					typedReq.Body, straightReq.Body, typedReq.ContentType = "", "", straightReq.ContentType
				}
				if straightReq.Accept != "application/json, */*" {
					t.Errorf("Accept %q straight", straightReq.Accept)
				}
				typedReq.Accept = straightReq.Accept
				if diff := cmp.Diff(typedReq, straightReq); diff != "" {
					t.Errorf("the request sent straight differs from the typed client's (-typed +straight):\n%s", diff)
				}
				if name1 != name2 {
					t.Errorf("created %q straight, %q by the typed client", name1, name2)
				}
				if (err1 == nil) != (err2 == nil) {
					t.Fatalf("straight: %v; typed client: %v", err1, err2)
				}
				if err1 == nil {
					return
				}
				if diff := cmp.Diff(err2.Error(), err1.Error()); diff != "" {
					t.Errorf("errors differ (-typed +straight):\n%s", diff)
				}
				for _, is := range []func(error) bool{apierrors.IsForbidden, apierrors.IsTooManyRequests, apierrors.IsInvalid,
					apierrors.IsBadRequest, apierrors.IsNotFound, apierrors.IsAlreadyExists, apierrors.IsInternalError} {
					if is(err1) != is(err2) {
						t.Errorf("the errors are told apart differently: %v and %v", err1, err2)
					}
				}
				d1, ok1 := apierrors.SuggestsClientDelay(err1)
				d2, ok2 := apierrors.SuggestsClientDelay(err2)
				if d1 != d2 || ok1 != ok2 {
					t.Errorf("suggested delay %d %v straight, %d %v by the typed client", d1, ok1, d2, ok2)
				}
			})
		}
	}
}

// decodeEvent reads an Event as the apiserver does, from JSON or protobuf.
func decodeEvent(t *testing.T, body string) *eventsv1.Event {
	t.Helper()
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(body), nil, nil)
	if err != nil {
		t.Fatalf("decoding the Event sent: %v", err)
	}
	e, ok := obj.(*eventsv1.Event)
	if !ok {
		t.Fatalf("sent a %T, not an Event", obj)
	}
	return e
}

// An Event's namespace and name go into its request's path: one that is no
// name (an Event's name the apiserver answered with, say) is never sent.
func TestAnEventWhoseNameIsNoNameIsNotSent(t *testing.T) {
	url, requests := kubetest.Answering(t, kubetest.Canned{Code: 200, ContentType: "application/json", Body: `{}`})
	sink, err := newHTTPSink(&rest.Config{Host: url, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := sink.create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "../kube-system"}}); err == nil {
		t.Error("an Event of namespace ../kube-system was created")
	}
	for _, name := range []string{"../../../kube-system/secrets/db", "..", ""} {
		if err := sink.patch(ctx, "shop", name, []byte(`{}`)); err == nil {
			t.Errorf("Event %q was patched", name)
		}
	}
	if got := requests(); len(got) > 0 {
		t.Errorf("requests sent: %v", got)
	}
}

// An Event's create and patch go on the wire as before kubeclient.Request
// built their URLs: the URLs httpSink built by hand then (beforeURL, kept
// here as it was), and the same strings spelled out, for a namespace and a
// name that escape, with the client's timeout as the query and without.
func TestHTTPSinkSendsWhatItSentBefore(t *testing.T) {
	host, requests := kubetest.Answering(t, kubetest.Canned{Code: http.StatusCreated, ContentType: "application/json",
		Body: `{"kind":"Event","apiVersion":"events.k8s.io/v1","metadata":{"name":"web.1"}}`})
	beforeURL := func(prefix, namespace, name string, timeout time.Duration) string {
		var query string
		if timeout > 0 {
			query = "?" + url.Values{"timeout": {timeout.String()}}.Encode()
		}
		if name == "" {
			return prefix + "/namespaces/" + url.PathEscape(namespace) + "/events" + query
		}
		return prefix + "/namespaces/" + url.PathEscape(namespace) + "/events/" + url.PathEscape(name) + query
	}
	event := &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Namespace: "a b", GenerateName: "web."}, Note: "n"}
	body, err := json.Marshal(&eventsv1.Event{TypeMeta: metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"}, ObjectMeta: event.ObjectMeta, Note: "n"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		timeout               time.Duration
		wantCreate, wantPatch string
	}{
		{30 * time.Second, "/prefix/apis/events.k8s.io/v1/namespaces/a%20b/events?timeout=30s", "/prefix/apis/events.k8s.io/v1/namespaces/a%20b/events/web.1%3Bx%3Fy?timeout=30s"},
		{0, "/prefix/apis/events.k8s.io/v1/namespaces/a%20b/events", "/prefix/apis/events.k8s.io/v1/namespaces/a%20b/events/web.1%3Bx%3Fy"},
	} {
		sink, err := newHTTPSink(&rest.Config{Host: host + "/prefix", Timeout: tc.timeout})
		if err != nil {
			t.Fatal(err)
		}
		if got := beforeURL(sink.prefix, "a b", "", tc.timeout); got != host+tc.wantCreate {
			t.Fatalf("the create's URL built before is %q, not %q", got, host+tc.wantCreate)
		}
		if got := beforeURL(sink.prefix, "a b", "web.1;x?y", tc.timeout); got != host+tc.wantPatch {
			t.Fatalf("the patch's URL built before is %q, not %q", got, host+tc.wantPatch)
		}
		n := len(requests())
		if name, err := sink.create(context.Background(), event); err != nil || name != "web.1" {
			t.Fatalf("created %q, %v", name, err)
		}
		if err := sink.patch(context.Background(), "a b", "web.1;x?y", []byte(`{"series":{"count":2}}`)); err != nil {
			t.Fatal(err)
		}
		want := []kubetest.Request{
			{Method: http.MethodPost, URI: tc.wantCreate, ContentType: "application/json", Accept: "application/json, */*", Body: string(body)},
			{Method: http.MethodPatch, URI: tc.wantPatch, ContentType: "application/merge-patch+json", Accept: "application/json, */*", Body: `{"series":{"count":2}}`},
		}
		if diff := cmp.Diff(want, requests()[n:], kubetest.OnTheWire); diff != "" {
			t.Errorf("timeout %s: on the wire (-before +now):\n%s", tc.timeout, diff)
		}
	}
}

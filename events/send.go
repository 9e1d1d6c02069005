package events

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
)

// The Recorder's requests are sent straight with net/http, through the
// http.Client client-go's typed Events client would use (the same TLS,
// credentials and user agent), as ssa/send.go sends the plugin's applies:
// the body built with encoding/json (what client-go's JSON serializer
// writes for an Event), the answer read for the name only. client-go's
// typed client sends an Event in protobuf, and it and the scheme's codecs
// ran code for the Events that nothing else in the plugin runs
// (docs/performance/memory.md). What is sent (but in JSON) and how an
// answer reads are client-go's: TestHTTPSinkAsTheTypedClient sends both
// ways and compares. Unlike rest.Request, a request answered with a
// Retry-After is not sent again at once: the Recorder pauses, as it does
// for every 429, and tries again when the wait is over.

// httpSink is the Events API of one cluster.
type httpSink struct {
	client *http.Client
	// prefix is events.k8s.io/v1's URL, without a trailing slash.
	prefix string
	// query is what client-go adds to every request: the client's timeout.
	query url.Values
}

// newHTTPSink is the Events API of the cluster of cfg, with the http.Client
// client-go's typed Events client would build from cfg.
func newHTTPSink(cfg *rest.Config) (*httpSink, error) {
	cfg = rest.CopyConfig(cfg)
	gv := eventsv1.SchemeGroupVersion
	cfg.GroupVersion, cfg.APIPath = &gv, "/apis"
	if cfg.UserAgent == "" {
		cfg.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	base, versioned, err := rest.DefaultServerUrlFor(cfg)
	if err != nil {
		return nil, err
	}
	rc, err := rest.NewRESTClient(base, versioned, rest.ClientContentConfig{GroupVersion: gv}, nil, client)
	if err != nil {
		return nil, err
	}
	u := rc.Get().URL() // the server and the group version's path
	u.RawQuery = ""
	s := &httpSink{client: client, prefix: strings.TrimSuffix(u.String(), "/")}
	if client.Timeout > 0 {
		s.query = url.Values{"timeout": {client.Timeout.String()}}
	}
	return s, nil
}

func (h *httpSink) create(ctx context.Context, e *eventsv1.Event) (string, error) {
	typed := *e
	typed.TypeMeta = metav1.TypeMeta{APIVersion: eventsv1.SchemeGroupVersion.String(), Kind: "Event"}
	body, err := json.Marshal(&typed)
	if err != nil {
		return "", err
	}
	raw, err := h.send(ctx, kubeclient.Request{Method: http.MethodPost, Namespace: e.Namespace, Collection: true, ContentType: "application/json", Body: body})
	if err != nil {
		return "", err
	}
	var made struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &made); err != nil {
		return "", err
	}
	return made.Metadata.Name, nil
}

func (h *httpSink) patch(ctx context.Context, namespace, name string, data []byte) error {
	_, err := h.send(ctx, kubeclient.Request{Method: http.MethodPatch, Namespace: namespace, Name: name, ContentType: string(types.MergePatchType), Body: data})
	return err
}

// eventsResource is what every request of the sink is about.
var eventsResource = schema.GroupResource{Group: eventsv1.GroupName, Resource: "events"}

// send sends r, an Events API request of the sink's cluster, and returns
// the answer, or the refusal as client-go gives it; a namespace or name
// that is no path segment is refused before anything is sent
// (kubeclient.Request.Send). Nothing is sent again here: the Recorder
// decides when an Event that was not taken is tried again (a 429's
// Retry-After included), and it has its own token bucket: no limiter is
// given here.
func (h *httpSink) send(ctx context.Context, r kubeclient.Request) ([]byte, error) {
	r.Prefix, r.Resource, r.Query = h.prefix, eventsResource, h.query
	raw, err := r.Send(ctx, h.client, nil)
	if err != nil {
		return nil, err
	}
	if err := failed(raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// failed is the error of a 2xx answer that is a Status other than
// Success, as client-go reads it into an Event; nil for anything else.
func failed(raw []byte) error {
	if !bytes.Contains(raw, []byte(`"Status"`)) {
		return nil
	}
	var s metav1.Status
	if json.Unmarshal(raw, &s) == nil && s.Kind == "Status" && s.Status != metav1.StatusSuccess {
		return apierrors.FromObject(&s)
	}
	return nil
}

package events

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
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
// ways and compares, answers with a Retry-After included (client-go sends
// those again, up to 10 times, after the wait they ask for).

// maxRetries is how often client-go's rest.Request sends a request again
// that was answered 429 or 5xx with a Retry-After in seconds.
const maxRetries = 10

// httpSink is the Events API of one cluster.
type httpSink struct {
	client *http.Client
	// prefix is events.k8s.io/v1's URL, without a trailing slash.
	prefix string
	// query is what client-go adds to every request: the client's timeout.
	query string
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
		s.query = "?" + url.Values{"timeout": {client.Timeout.String()}}.Encode()
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
	u := h.prefix + "/namespaces/" + url.PathEscape(e.Namespace) + "/events" + h.query
	raw, err := h.send(ctx, http.MethodPost, u, "application/json", body, "")
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
	u := h.prefix + "/namespaces/" + url.PathEscape(namespace) + "/events/" + url.PathEscape(name) + h.query
	_, err := h.send(ctx, http.MethodPatch, u, string(types.MergePatchType), data, name)
	return err
}

// send sends body to u and returns the answer, or the refusal as client-go
// gives it; an answer of 429 or 5xx with a Retry-After is sent again after
// that wait, at most maxRetries times, as rest.Request does.
func (h *httpSink) send(ctx context.Context, method, u, contentType string, body []byte, name string) ([]byte, error) {
	for retries := 0; ; retries++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header = http.Header{"Content-Type": {contentType}, "Accept": {"application/json, */*"}}
		resp, err := h.client.Do(req)
		if err != nil {
			return nil, err // a *url.Error, as client-go returns it
		}
		if wait, ok := retryAfter(resp); ok && retries < maxRetries {
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
			resp.Body.Close()
			sleep(ctx, wait)
			continue
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w", err)
		}
		warn(resp.Header)
		if resp.StatusCode < http.StatusOK || resp.StatusCode > http.StatusPartialContent {
			return nil, refusal(resp, raw, method, name)
		}
		if err := failed(raw); err != nil {
			return nil, err
		}
		return raw, nil
	}
}

// retryAfter is the wait of an answer client-go's rest.Request sends again:
// 429 or 5xx with a Retry-After in seconds.
func retryAfter(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode < http.StatusInternalServerError {
		return 0, false
	}
	h := resp.Header.Get("Retry-After")
	if h == "" {
		return 0, false
	}
	s, err := strconv.Atoi(h)
	if err != nil {
		return 0, false
	}
	return time.Duration(s) * time.Second, true
}

func sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// status is what a failed answer says: a Status, or not.
func status(raw []byte) (*metav1.Status, bool) {
	var s metav1.Status
	if json.Unmarshal(raw, &s) != nil || s.Kind != "Status" {
		return nil, false
	}
	return &s, true
}

// failed is the error of a 2xx answer that is a Status other than
// Success, as client-go reads it into an Event; nil for anything else.
func failed(raw []byte) error {
	if !bytes.Contains(raw, []byte(`"Status"`)) {
		return nil
	}
	if s, ok := status(raw); ok && s.Status != metav1.StatusSuccess {
		return apierrors.FromObject(s)
	}
	return nil
}

// refusal is the error client-go's Result gives for the answer raw with a
// status code outside 200–206: the apiserver's Status as a StatusError when
// the answer is one that failed, else a generic error naming the code, the
// verb and the Event, with a text answer as its message (ssa/send.go's).
func refusal(resp *http.Response, raw []byte, method, name string) error {
	if s, ok := status(raw); ok && s.Status == metav1.StatusFailure {
		return apierrors.FromObject(s)
	}
	const maxText = 2048 // client-go's cap on an unstructured answer in an error
	text := raw
	if len(text) > maxText {
		text = text[:maxText]
	}
	message := "unknown"
	if isText(resp.Header.Get("Content-Type")) {
		message = strings.TrimSpace(string(text))
	}
	retryAfter, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
	gr := schema.GroupResource{Group: eventsv1.GroupName, Resource: "events"}
	return apierrors.NewGenericServerResponse(resp.StatusCode, method, gr, name, message, retryAfter, true)
}

func isText(contentType string) bool {
	if contentType == "" {
		return true
	}
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && strings.HasPrefix(media, "text/")
}

// warn hands the answer's warnings to client-go's default handler, as a
// request through rest.Request does.
func warn(h http.Header) {
	values := h["Warning"]
	if len(values) == 0 {
		return
	}
	warnings, _ := utilnet.ParseWarningHeaders(values)
	for _, w := range warnings {
		rest.WarningLogger{}.HandleWarningHeader(w.Code, w.Agent, w.Text)
	}
}

package kubeclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// The plugin sends its applies (ssa) and its Events (events) straight with
// net/http, past client-go's rest.Request (Request.Send, request.go); do
// reads an answer as rest.Request's Result does, so that a caller sees the
// same errors.

// do sends body (of contentType) with method to u through client, a
// request about the object name of gr, and returns the answer: its body for
// a status code of 200–206, else the refusal as client-go gives it
// (refusal). The answer's warnings go to client-go's handler. Nothing is
// sent again here: the transport under client retries what it may.
func do(ctx context.Context, client *http.Client, method, u, contentType string, body []byte, gr schema.GroupResource, name string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, u, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header = http.Header{"Content-Type": {contentType}, "Accept": {"application/json, */*"}}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err // a *url.Error, as client-go returns it
	}
	defer resp.Body.Close()
	raw, err := readBody(resp)
	if err != nil {
		return nil, fmt.Errorf("unexpected error when reading response body. Please retry. Original error: %w", err)
	}
	warn(resp.Header)
	if resp.StatusCode < http.StatusOK || resp.StatusCode > http.StatusPartialContent {
		return nil, refusal(resp, raw, method, gr, name)
	}
	return raw, nil
}

// bodies holds buffers that answers are read into; an answer is then copied
// out at its size, as it may be kept (kube.Answer).
var bodies = sync.Pool{New: func() any { return bytes.NewBuffer(make([]byte, 0, 16<<10)) }}

func readBody(resp *http.Response) ([]byte, error) {
	if n := resp.ContentLength; n >= 0 && n < 64<<20 {
		raw := make([]byte, n)
		_, err := io.ReadFull(resp.Body, raw)
		return raw, err
	}
	buf := bodies.Get().(*bytes.Buffer)
	defer bodies.Put(buf)
	buf.Reset()
	if _, err := buf.ReadFrom(resp.Body); err != nil {
		return nil, err
	}
	return bytes.Clone(buf.Bytes()), nil
}

// refusal is the error client-go's Result gives for an answer raw with a
// status code outside 200–206 to a request of method on the object name of
// gr: the apiserver's Status as a StatusError when the answer is one that
// failed, else a generic error naming the code, the verb and the object,
// with a text answer as its message.
func refusal(resp *http.Response, raw []byte, method string, gr schema.GroupResource, name string) error {
	var status metav1.Status
	if json.Unmarshal(raw, &status) == nil && status.Kind == "Status" && status.Status == metav1.StatusFailure {
		return apierrors.FromObject(&status)
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
	return apierrors.NewGenericServerResponse(resp.StatusCode, method, gr, name, message, retryAfter, true)
}

func isText(contentType string) bool {
	if contentType == "" {
		return true
	}
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && strings.HasPrefix(media, "text/")
}

// warn hands an answer's warnings to client-go's default handler, as a
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

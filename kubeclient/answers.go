package kubeclient

import (
	"encoding/json"
	"mime"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
)

// The plugin sends its applies (ssa) and its Events (events) straight with
// net/http, past client-go's rest.Request; these read an answer as
// rest.Request's Result does, so that a caller sees the same errors.

// Refusal is the error client-go's Result gives for an answer raw with a
// status code outside 200–206 to a request of method on the object name of
// gr: the apiserver's Status as a StatusError when the answer is one that
// failed, else a generic error naming the code, the verb and the object,
// with a text answer as its message.
func Refusal(resp *http.Response, raw []byte, method string, gr schema.GroupResource, name string) error {
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

// Warn hands an answer's warnings to client-go's default handler, as a
// request through rest.Request does.
func Warn(h http.Header) {
	values := h["Warning"]
	if len(values) == 0 {
		return
	}
	warnings, _ := utilnet.ParseWarningHeaders(values)
	for _, w := range warnings {
		rest.WarningLogger{}.HandleWarningHeader(w.Code, w.Agent, w.Text)
	}
}

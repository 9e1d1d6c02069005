package kubeclient

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/flowcontrol"
)

// Request is a request the plugin builds by hand and sends straight with
// net/http, past client-go's rest.Request (ssa's applies, events' Events),
// to the object Name of Resource in Namespace, or to the collection of
// Resource there (Collection). It is not Requests, which counts what the
// transport sent.
type Request struct {
	Method string
	// Prefix is the group version's URL, the server and its path
	// ("https://host/apis/gateway.networking.k8s.io/v1"), without a trailing
	// slash.
	Prefix    string
	Namespace string
	// Resource is what the request is about: its Resource is the path's
	// segment after the namespace, and a refusal names the group resource
	// as client-go does.
	Resource schema.GroupResource
	// Name is the object's name; with Collection the path ends at the
	// resource (a create), and Name is left empty.
	Name       string
	Collection bool
	// Query is the request's query (none when it encodes to nothing).
	Query       url.Values
	ContentType string
	Body        []byte
	// Repeatable says that sending the request again cannot do anything
	// twice, so the transport may send it again (what SafeToRepeat marks).
	Repeatable bool
}

// Send sends the request through client and returns the answer, as do
// does: its body for a status code of 200–206, else the refusal as
// client-go gives it. In this order, it refuses a namespace or name that
// is no path segment (CheckPathSegments) before anything is sent, waits
// for a token of limiter (none when nil), marks the request safe to repeat
// when it is Repeatable, and sends it to the URL built from the checked
// segments (url).
func (r Request) Send(ctx context.Context, client *http.Client, limiter flowcontrol.RateLimiter) ([]byte, error) {
	names := []string{r.Namespace, r.Name}
	if r.Collection {
		names = names[:1]
	}
	// Escaped, a "/" would stay in its segment; refused, it never reaches the wire.
	if err := CheckPathSegments(names...); err != nil {
		return nil, err
	}
	// The resource comes from the caller's code, not from a name read
	// anywhere; it is checked all the same, as every segment of the path is.
	if err := CheckPathSegments(r.Resource.Resource); err != nil {
		return nil, err
	}
	if limiter != nil {
		if err := limiter.Wait(ctx); err != nil {
			return nil, fmt.Errorf("client rate limiter Wait returned an error: %w", err)
		}
	}
	if r.Repeatable {
		ctx = SafeToRepeat(ctx)
	}
	return do(ctx, client, r.Method, r.url(), r.ContentType, r.Body, r.Resource, r.Name)
}

// url is Prefix, "/namespaces/", the namespace, "/", the resource, then
// (unless Collection) "/" and the name, and "?" and the encoded query
// unless it is empty; the namespace and the name escaped as path segments
// (url.PathEscape). It is written once, at its size.
func (r *Request) url() string {
	const namespaces = "/namespaces/"
	ns, name, query := url.PathEscape(r.Namespace), "", r.Query.Encode()
	if !r.Collection {
		name = url.PathEscape(r.Name)
	}
	var b strings.Builder
	b.Grow(len(r.Prefix) + len(namespaces) + len(ns) + 1 + len(r.Resource.Resource) + 1 + len(name) + 1 + len(query))
	b.WriteString(r.Prefix)
	b.WriteString(namespaces)
	b.WriteString(ns)
	b.WriteByte('/')
	b.WriteString(r.Resource.Resource)
	if !r.Collection {
		b.WriteByte('/')
		b.WriteString(name)
	}
	if query != "" {
		b.WriteByte('?')
		b.WriteString(query)
	}
	return b.String()
}

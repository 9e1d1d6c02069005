package ssa

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/gatewayapi-ssa/rollouts-plugin/kubeclient"
	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
)

// The plugin's applies are sent straight with net/http, through the same
// http.Client, transport and token bucket as every other request of the
// REST client (TLS, credentials, user agent, the plugin's retries), but past
// client-go's rest.Request: that builds the URL with path.Join and a second
// time for its metrics, copies its headers and query, and reads the answer
// with io.ReadAll, about a quarter of what the plugin allocated per route
// written (docs/performance/cpu-per-route.md). What a write sends and how
// its answer reads are the same: TestSenderAsTheRESTClient sends both ways
// and compares. Through rest.Request the plugin executes more instructions
// per route written (docs/performance/cpu-per-route.md).

// sender sends applies of one group version.
type sender struct {
	client  *http.Client
	prefix  string // the group version's URL, without a trailing slash
	limiter flowcontrol.RateLimiter
}

// senderFor is a sender of rc's group version; false if rc is no REST
// client of client-go's (a fake in a test), whose requests then go the usual
// way.
func senderFor(rc rest.Interface) (*sender, bool) {
	c, ok := rc.(*rest.RESTClient)
	if !ok || c == nil || c.Client == nil {
		return nil, false
	}
	u := c.Get().URL() // the server and the group version's path
	return &sender{client: c.Client, prefix: strings.TrimSuffix(u.String(), "/"), limiter: c.GetRateLimiter()}, true
}

// apply sends body, a server-side apply of the route ref in its JSON form,
// with the query parameters of opts, and returns the apiserver's answer, or
// its refusal as client-go gives it (a StatusError from the Status it
// answered with, else a generic error of the status code).
func (s *sender) apply(ctx context.Context, ref routes.Ref, body []byte, opts metav1.PatchOptions) ([]byte, error) {
	// Escaped, a "/" would stay in its segment; refused, it never reaches the wire.
	if err := kubeclient.CheckPathSegments(ref.Namespace, ref.Name); err != nil {
		return nil, err
	}
	if s.limiter != nil {
		if err := s.limiter.Wait(ctx); err != nil {
			return nil, fmt.Errorf("client rate limiter Wait returned an error: %w", err)
		}
	}
	resource := ref.Kind.Resource()
	u := s.prefix + "/namespaces/" + url.PathEscape(ref.Namespace) + "/" + resource + "/" + url.PathEscape(ref.Name) + "?" + patchQuery(opts).Encode()
	return kubeclient.Send(ctx, s.client, http.MethodPatch, u, string(types.ApplyYAMLPatchType), body,
		schema.GroupResource{Group: routes.Group, Resource: resource}, ref.Name)
}

package ssa

import (
	"context"
	"net/http"
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
// answered with, else a generic error of the status code). repeatable says
// a second attempt could not write twice (Writer.Apply). kubeclient's
// Request.Send refuses a namespace or name that is no path segment before
// anything is sent, and waits for the client's token bucket.
func (s *sender) apply(ctx context.Context, ref routes.Ref, body []byte, opts metav1.PatchOptions, repeatable bool) ([]byte, error) {
	return kubeclient.Request{
		Method:      http.MethodPatch,
		Prefix:      s.prefix,
		Namespace:   ref.Namespace,
		Resource:    schema.GroupResource{Group: routes.Group, Resource: ref.Kind.Resource()},
		Name:        ref.Name,
		Query:       patchQuery(opts),
		ContentType: string(types.ApplyYAMLPatchType),
		Body:        body,
		Repeatable:  repeatable,
	}.Send(ctx, s.client, s.limiter)
}

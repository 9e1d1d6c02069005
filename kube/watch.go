package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	sigsjson "sigs.k8s.io/json"
)

// The watch caches list and watch routes with a plain REST client and read
// each served route straight into what they keep (a cachedRoute, made by
// Decode), instead of through client-go's unstructured decoding: the object
// of every watch event is read once, into the Route a call copies.

// cachedRoute is what a watch cache keeps of a route: the Route the plugin
// reads, made once when the event arrives, so a call copies it instead of
// reading the whole served object again. Its ObjectMeta holds only what the
// informer keys and orders it by (and, for a bookmark, the annotation that
// ends a watch's initial events). A route Decode cannot read is kept with
// the reason, which reading it answers.
type cachedRoute struct {
	metav1.ObjectMeta
	route routes.Route
	err   error
}

func (c *cachedRoute) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (c *cachedRoute) DeepCopyObject() runtime.Object {
	return &cachedRoute{ObjectMeta: *c.ObjectMeta.DeepCopy(), route: c.route.DeepCopy(), err: c.err}
}

// keys is the identity of a served object, read when nothing else of it can be.
type keys struct {
	Metadata struct {
		Name            string            `json:"name"`
		Namespace       string            `json:"namespace"`
		ResourceVersion string            `json:"resourceVersion"`
		Annotations     map[string]string `json:"annotations"`
	} `json:"metadata"`
}

// cacheEntry is what a watch cache keeps of a route read.
func cacheEntry(r routes.Route) *cachedRoute {
	return &cachedRoute{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace, ResourceVersion: r.ResourceVersion}, route: r}
}

// bookmark is a watch's bookmark event as the informer reads it.
func bookmark(resourceVersion string, annotations map[string]string) *cachedRoute {
	return &cachedRoute{ObjectMeta: metav1.ObjectMeta{ResourceVersion: resourceVersion, Annotations: annotations}}
}

// toCache reads a served route into what a watch cache keeps.
func toCache(data []byte) (*cachedRoute, error) {
	r, err := routes.Decode(data)
	if err == nil {
		return cacheEntry(r), nil
	}
	var k keys
	if kerr := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &k); kerr != nil {
		return nil, fmt.Errorf("reading a served route: %w", err)
	}
	m := k.Metadata
	return &cachedRoute{ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion}, err: err}, nil
}

// routeList is a LIST's answer as a watch cache keeps it.
type routeList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []cachedRoute
}

func (l *routeList) DeepCopyObject() runtime.Object {
	out := &routeList{TypeMeta: l.TypeMeta, ListMeta: *l.ListMeta.DeepCopy(), Items: make([]cachedRoute, len(l.Items))}
	for i := range l.Items {
		out.Items[i] = *l.Items[i].DeepCopyObject().(*cachedRoute)
	}
	return out
}

// servedList is a LIST's answer as the apiserver serves it.
type servedList struct {
	Metadata metav1.ListMeta   `json:"metadata"`
	Items    []json.RawMessage `json:"items"`
}

// body is a request's answer, or the apiserver's Status as an error (Raw
// alone answers a refusal with a generic error that has lost the Status).
func body(res rest.Result) ([]byte, error) {
	if err := res.Error(); err != nil {
		return nil, err
	}
	return res.Raw()
}

// listRoutes LISTs routes with opts and reads every item as a cache keeps it.
func listRoutes(ctx context.Context, client rest.Interface, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*routeList, error) {
	raw, err := body(client.Get().AbsPath(collection(gvr, namespace)...).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx))
	if err != nil {
		return nil, err
	}
	var l servedList
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &l); err != nil {
		return nil, fmt.Errorf("reading the list of %s in %s: %w", gvr.Resource, namespace, err)
	}
	out := &routeList{ListMeta: l.Metadata, Items: make([]cachedRoute, 0, len(l.Items))}
	for _, item := range l.Items {
		cr, err := toCache(item)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, *cr)
	}
	return out, nil
}

// watchRoutes starts a watch of routes with opts; its events carry
// cachedRoutes (bookmarks too: a cachedRoute with only metadata), and an
// error event the apiserver's Status. fresh (nil: none) is told how the
// watch ends, of its errors and of the end of its initial events.
func watchRoutes(ctx context.Context, client rest.Interface, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions, fresh *freshness) (watch.Interface, error) {
	opts.Watch = true
	body, err := client.Get().AbsPath(collection(gvr, namespace)...).VersionedParams(&opts, metav1.ParameterCodec).Stream(ctx)
	if err != nil {
		return nil, err
	}
	d := &eventDecoder{body: body, frames: routes.NewFrames(body), fresh: fresh, started: time.Now()}
	if opts.TimeoutSeconds != nil {
		d.timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	return watch.NewStreamWatcher(d, apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
}

// eventDecoder reads a watch stream of JSON events. An event of a route is
// read in one pass, frame and object together; anything else (a bookmark
// the pass cannot read, an error, a route Decode reads the long way) is read
// part by part.
type eventDecoder struct {
	body    io.ReadCloser
	frames  *routes.Frames
	fresh   *freshness
	started time.Time
	timeout time.Duration
	stopped atomic.Bool
}

// initialEventsEnd is the annotation of the bookmark that ends a watch's
// initial events (a list streamed through the watch).
const initialEventsEnd = "k8s.io/initial-events-end"

func (d *eventDecoder) Decode() (watch.EventType, runtime.Object, error) {
	t, obj, err := d.decode()
	if d.fresh != nil {
		switch {
		case err != nil && !d.stopped.Load():
			d.fresh.ended(err, time.Since(d.started), d.timeout)
		case t == watch.Error:
			d.fresh.breaks(apierrors.FromObject(obj))
		case t == watch.Bookmark && obj.(*cachedRoute).Annotations[initialEventsEnd] == "true":
			d.fresh.listed(obj.(*cachedRoute).ResourceVersion)
		}
	}
	return t, obj, err
}

func (d *eventDecoder) decode() (watch.EventType, runtime.Object, error) {
	frame, err := d.frames.Next()
	if err != nil {
		return "", nil, err
	}
	if ev, ok := routes.DecodeEvent(frame); ok {
		if ev.Type == string(watch.Bookmark) {
			return watch.Bookmark, bookmark(ev.ResourceVersion, ev.Annotations), nil
		}
		return watch.EventType(ev.Type), cacheEntry(ev.Route), nil
	}
	var parts struct {
		Type   watch.EventType `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(frame, &parts); err != nil {
		return "", nil, fmt.Errorf("reading a watch event: %w", err)
	}
	switch parts.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		cr, err := toCache(parts.Object)
		return parts.Type, cr, err
	case watch.Bookmark:
		var k keys
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(parts.Object, &k); err != nil {
			return "", nil, fmt.Errorf("reading a bookmark: %w", err)
		}
		return parts.Type, bookmark(k.Metadata.ResourceVersion, k.Metadata.Annotations), nil
	case watch.Error:
		status := &metav1.Status{}
		if err := json.Unmarshal(parts.Object, status); err != nil {
			return "", nil, fmt.Errorf("reading a watch error: %w", err)
		}
		return parts.Type, status, nil
	}
	return "", nil, fmt.Errorf("a watch event of unknown type %q", parts.Type)
}

// Close is the watch being stopped by its reader: the end it causes is no
// break.
func (d *eventDecoder) Close() {
	d.stopped.Store(true)
	d.body.Close()
}

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
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
// decodeRoute), instead of through client-go's unstructured decoding: the object
// of every watch event is read once, into the Route a call copies.

// cachedRoute is what a watch cache keeps of a route: the Route the plugin
// reads, made once when the event arrives, so a call copies it instead of
// reading the whole served object again. The informer keys and orders it by
// ref and resourceVersion, through GetObjectMeta (a bookmark also has the
// annotation that ends a watch's initial events): no ObjectMeta is kept in
// each entry. A route decodeRoute cannot read is kept with the reason, which
// reading it answers.
type cachedRoute struct {
	ref             routes.Ref
	resourceVersion string
	annotations     map[string]string // a bookmark's
	// route is nil for a slim entry: what the cache keeps of a route no
	// call has used (Cluster.readByCalls), of which a namespace may hold
	// thousands: its identity (ref, version, resourceVersion and labels),
	// what a label selector reads.
	route   *routes.Route
	err     error
	version string
	labels  labelPairs // a slim entry's
	// meta is what GetObjectMeta answers for a whole entry, made with it:
	// the informer reads an entry's key and version some eight times per
	// event, and a slim entry, of which there may be thousands, makes it
	// anew each time instead.
	meta *metav1.ObjectMeta
}

// GetObjectMeta is what the informer reads of the entry (meta.Accessor).
// The answer is read, never changed.
func (c *cachedRoute) GetObjectMeta() metav1.Object {
	if c.meta != nil {
		return c.meta
	}
	return c.objectMeta()
}

func (c *cachedRoute) objectMeta() *metav1.ObjectMeta {
	return &metav1.ObjectMeta{Name: c.ref.Name, Namespace: c.ref.Namespace, ResourceVersion: c.resourceVersion, Annotations: c.annotations}
}

// slim says the entry keeps only the route's identity.
func (c *cachedRoute) slim() bool { return c.route == nil && c.err == nil }

// whole is the route an entry keeps: all of it, or, slim, its identity.
func (c *cachedRoute) whole() routes.Route {
	if c.route != nil {
		return *c.route
	}
	return routes.Route{Ref: c.ref, Version: c.version, ResourceVersion: c.resourceVersion, Labels: c.labels.asMap()}
}

func (c *cachedRoute) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

func (c *cachedRoute) DeepCopyObject() runtime.Object {
	out := &cachedRoute{ref: c.ref, resourceVersion: c.resourceVersion, annotations: maps.Clone(c.annotations), err: c.err, version: c.version, labels: c.labels}
	if c.route != nil {
		r := c.route.DeepCopy()
		out.route = &r
		out.meta = out.objectMeta()
	}
	return out
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

// keeping says what a watch cache keeps of each route: whole the routes
// uses says a call uses (nil: every route), and of the others what a label
// selector reads (slimEntry), their labels shared through labels.
type keeping struct {
	uses   func(routes.Ref) bool
	labels *labelSets
}

// whole says whether the cache keeps the route whole.
func (k *keeping) whole(ref routes.Ref) bool { return k == nil || k.uses == nil || k.uses(ref) }

// cacheEntry is what a watch cache keeps of a route read (keeping).
func cacheEntry(r routes.Route, k *keeping) *cachedRoute {
	if !k.whole(r.Ref) {
		return k.slimEntry(Identity{Ref: r.Ref, Version: r.Version, ResourceVersion: r.ResourceVersion, Labels: r.Labels})
	}
	c := &cachedRoute{ref: r.Ref, resourceVersion: r.ResourceVersion, route: &r}
	c.meta = c.objectMeta()
	return c
}

// slimEntry is what a watch cache keeps of a route no call uses.
func (k *keeping) slimEntry(id Identity) *cachedRoute {
	return &cachedRoute{ref: id.Ref, resourceVersion: id.ResourceVersion, version: id.Version, labels: k.labels.of(id.Labels)}
}

// bookmark is a watch's bookmark event as the informer reads it.
func bookmark(resourceVersion string, annotations map[string]string) *cachedRoute {
	return &cachedRoute{resourceVersion: resourceVersion, annotations: annotations}
}

// toCache reads a served route into what a watch cache keeps (cacheEntry).
func toCache(data []byte, k *keeping) (*cachedRoute, error) {
	r, err := decodeRoute(data)
	if err == nil {
		return cacheEntry(r, k), nil
	}
	var id keys
	if kerr := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &id); kerr != nil {
		return nil, fmt.Errorf("reading a served route: %w", err)
	}
	m := id.Metadata
	return &cachedRoute{ref: routes.Ref{Namespace: m.Namespace, Name: m.Name}, resourceVersion: m.ResourceVersion, err: err}, nil
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

// listRoutes LISTs routes with opts and reads every item as a cache keeps
// it (keeping; nil: every route whole).
func listRoutes(ctx context.Context, client rest.Interface, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions, k *keeping) (*routeList, error) {
	path, err := resourcePath(gvr, namespace, "")
	if err != nil {
		return nil, err
	}
	raw, err := body(client.Get().AbsPath(path...).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx))
	if err != nil {
		return nil, err
	}
	var l servedList
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(raw, &l); err != nil {
		return nil, fmt.Errorf("reading the list of %s in %s: %w", gvr.Resource, namespace, err)
	}
	out := &routeList{ListMeta: l.Metadata, Items: make([]cachedRoute, 0, len(l.Items))}
	for _, item := range l.Items {
		cr, err := toCache(item, k)
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
// watch ends, of its errors and of the end of its initial events; k says
// what it keeps of each route (keeping).
func watchRoutes(ctx context.Context, client rest.Interface, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions, fresh *freshness, k *keeping) (watch.Interface, error) {
	opts.Watch = true
	path, err := resourcePath(gvr, namespace, "")
	if err != nil {
		return nil, err
	}
	body, err := client.Get().AbsPath(path...).VersionedParams(&opts, metav1.ParameterCodec).Stream(ctx)
	if err != nil {
		return nil, err
	}
	d := &eventDecoder{body: body, frames: newFrames(body), fresh: fresh, keep: k, started: time.Now(),
		initial: opts.SendInitialEvents != nil && *opts.SendInitialEvents}
	if opts.TimeoutSeconds != nil {
		d.timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	return watch.NewStreamWatcher(d, apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
}

// eventDecoder reads a watch stream of JSON events. An event of a route is
// read in one pass, frame and object together; anything else (a bookmark
// the pass cannot read, an error, a route decodeRoute reads the long way) is read
// part by part.
type eventDecoder struct {
	body   io.ReadCloser
	frames *Frames
	fresh  *freshness
	keep   *keeping
	// initial: the watch is sending its initial events (a list streamed
	// through the watch), until the bookmark that ends them.
	initial bool
	started time.Time
	timeout time.Duration
	stopped atomic.Bool
}

// initialEventsEnd is the annotation of the bookmark that ends a watch's
// initial events (a list streamed through the watch).
const initialEventsEnd = "k8s.io/initial-events-end"

func (d *eventDecoder) Decode() (watch.EventType, runtime.Object, error) {
	t, obj, err := d.decode()
	if t == watch.Bookmark && obj.(*cachedRoute).annotations[initialEventsEnd] == "true" {
		d.initial = false
	}
	if d.fresh != nil {
		switch {
		case err != nil && !d.stopped.Load():
			d.fresh.ended(err, time.Since(d.started), d.timeout)
		case t == watch.Error:
			d.fresh.breaks(apierrors.FromObject(obj))
		case t == watch.Bookmark && obj.(*cachedRoute).annotations[initialEventsEnd] == "true":
			d.fresh.listed(obj.(*cachedRoute).resourceVersion)
		}
	}
	return t, obj, err
}

func (d *eventDecoder) decode() (watch.EventType, runtime.Object, error) {
	frame, err := d.frames.Next()
	if err != nil {
		return "", nil, err
	}
	if d.initial && d.keep != nil && d.keep.uses != nil {
		// A watch's initial events are mostly of routes no call uses yet
		// (a namespace may hold thousands): the identity first, and of
		// such a route nothing more is read. Later events are mostly the
		// plugin's own writes, of routes it uses: read whole at once.
		if id, ok := decodeEventIdentity(frame); ok {
			switch {
			case id.Type == string(watch.Bookmark):
				return watch.Bookmark, bookmark(id.ResourceVersion, id.Annotations), nil
			case !d.keep.uses(id.Ref):
				return watch.EventType(id.Type), d.keep.slimEntry(id), nil
			}
		}
	}
	if ev, ok := decodeEvent(frame); ok {
		if ev.Type == string(watch.Bookmark) {
			return watch.Bookmark, bookmark(ev.ResourceVersion, ev.Annotations), nil
		}
		return watch.EventType(ev.Type), cacheEntry(ev.Route, d.keep), nil
	}
	return d.decodeSlowly(frame)
}

// decodeSlowly decodes a watch event the one-pass decoder of package routes
// does not read: an error, or a route it cannot decode (its fields then
// read as they are).
func (d *eventDecoder) decodeSlowly(frame []byte) (watch.EventType, runtime.Object, error) {
	var parts struct {
		Type   watch.EventType `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(frame, &parts); err != nil {
		return "", nil, fmt.Errorf("reading a watch event: %w", err)
	}
	switch parts.Type {
	case watch.Added, watch.Modified, watch.Deleted:
		cr, err := toCache(parts.Object, d.keep)
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

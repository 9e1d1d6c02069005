package routes

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

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
	route Route
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
func cacheEntry(r Route) *cachedRoute {
	return &cachedRoute{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace, ResourceVersion: r.ResourceVersion}, route: r}
}

// bookmark is a watch's bookmark event as the informer reads it.
func bookmark(resourceVersion string, annotations map[string]string) *cachedRoute {
	return &cachedRoute{ObjectMeta: metav1.ObjectMeta{ResourceVersion: resourceVersion, Annotations: annotations}}
}

// toCache reads a served route into what a watch cache keeps.
func toCache(data []byte) (*cachedRoute, error) {
	r, err := Decode(data)
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

// routesPath is the path of a kind's routes in a namespace.
func routesPath(gvr schema.GroupVersionResource, namespace string) []string {
	return []string{"/apis", gvr.Group, gvr.Version, "namespaces", namespace, gvr.Resource}
}

// listRoutes LISTs routes with opts and reads every item as a cache keeps it.
func listRoutes(ctx context.Context, client rest.Interface, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (*routeList, error) {
	raw, err := body(client.Get().AbsPath(routesPath(gvr, namespace)...).VersionedParams(&opts, metav1.ParameterCodec).Do(ctx))
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
// error event the apiserver's Status.
func watchRoutes(ctx context.Context, client rest.Interface, gvr schema.GroupVersionResource, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	body, err := client.Get().AbsPath(routesPath(gvr, namespace)...).VersionedParams(&opts, metav1.ParameterCodec).Stream(ctx)
	if err != nil {
		return nil, err
	}
	return watch.NewStreamWatcher(&eventDecoder{body: body, frames: frameReader{r: body}},
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
}

// eventDecoder reads a watch stream of JSON events. An event of a route is
// read in one pass, frame and object together; anything else (a bookmark
// the pass cannot read, an error, a route Decode reads the long way) is read
// part by part.
type eventDecoder struct {
	body   io.ReadCloser
	frames frameReader
}

func (d *eventDecoder) Decode() (watch.EventType, runtime.Object, error) {
	frame, err := d.frames.next()
	if err != nil {
		return "", nil, err
	}
	var ev struct {
		Type   watch.EventType `json:"type"`
		Object served          `json:"object"`
	}
	if sigsjson.UnmarshalCaseSensitivePreserveInts(frame, &ev) == nil {
		switch ev.Type {
		case watch.Added, watch.Modified, watch.Deleted:
			if r, ok := ev.Object.route(); ok {
				return ev.Type, cacheEntry(r), nil
			}
		case watch.Bookmark:
			if annotations, ok := stringMap(ev.Object.Metadata.Annotations); ok {
				return ev.Type, bookmark(ev.Object.Metadata.ResourceVersion, annotations), nil
			}
		}
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

func (d *eventDecoder) Close() { d.body.Close() }

// frameReader splits a stream of JSON objects (a watch's body) into one
// object each without decoding them: it only follows strings and nesting to
// find where each object ends.
type frameReader struct {
	r   io.Reader
	buf []byte // read; buf[start:] not yet returned
	// The object being read starts at buf[start]; buf[start:pos] is scanned.
	start, pos int
	nesting
}

// next returns the next object, valid until the following call.
func (f *frameReader) next() ([]byte, error) {
	f.buf = f.buf[:copy(f.buf, f.buf[f.start:])]
	f.pos -= f.start
	f.start = 0
	for {
		for ; f.pos < len(f.buf); f.pos++ {
			c := f.buf[f.pos]
			if f.depth == 0 && !f.inString {
				if isSpace(c) {
					f.start = f.pos + 1 // between objects
					continue
				}
				if c != '{' {
					return nil, fmt.Errorf("reading a watch event: %q where an object starts", c)
				}
			}
			f.nesting.next(c)
			if f.depth == 0 && !f.inString && c == '}' {
				f.pos++
				frame := f.buf[f.start:f.pos]
				f.start = f.pos
				return frame, nil
			}
		}
		if cap(f.buf)-len(f.buf) < 4096 {
			f.buf = append(make([]byte, 0, 2*cap(f.buf)+8192), f.buf...)
		}
		n, err := f.r.Read(f.buf[len(f.buf):cap(f.buf)])
		f.buf = f.buf[:len(f.buf)+n]
		switch {
		case n > 0:
		case err == io.EOF && f.pos > f.start:
			return nil, io.ErrUnexpectedEOF
		case err != nil:
			return nil, err
		}
	}
}

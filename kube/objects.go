package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// The watch caches of the small objects the plugin reads beside the routes
// (GatewayClasses, Gateways and ListenerSets in gateways.go, ReferenceGrants
// in grants.go): each keeps what read makes of an object, nothing more.

// readObject makes what a cache keeps of one served object.
type readObject func(data []byte) (runtime.Object, error)

// objectList is a LIST of what a cache keeps.
type objectList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []runtime.Object
}

func (l *objectList) DeepCopyObject() runtime.Object {
	out := &objectList{TypeMeta: l.TypeMeta, ListMeta: *l.ListMeta.DeepCopy(), Items: make([]runtime.Object, len(l.Items))}
	for i, o := range l.Items {
		out.Items[i] = o.DeepCopyObject()
	}
	return out
}

// objectCache starts, on first use, the watch cache of a resource in a
// namespace ("" for all of a cluster-scoped one), keeping of each object
// what read makes of it (objects like example); nil while it has not
// synced.
func (c *Cluster) objectCache(ctx context.Context, gvr schema.GroupVersionResource, namespace string, example runtime.Object, read readObject) cache.SharedIndexInformer {
	key := parentKey{gvr: gvr, namespace: namespace}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	nc, ok := c.parents[key]
	if !ok {
		nc = c.run(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return listObjects(ctx, c, gvr, namespace, o, read)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				o.Watch = true
				path, err := resourcePath(gvr, namespace, "")
				if err != nil {
					return nil, err
				}
				body, err := c.client.Get().AbsPath(path...).VersionedParams(&o, metav1.ParameterCodec).Stream(ctx)
				if err != nil {
					return nil, err
				}
				return watch.NewStreamWatcher(&objectDecoder{body: body, frames: newFrames(body), read: read},
					apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
			},
		}, example, gvr, namespace, gvr.Resource, nil)
		c.parents[key] = nc
	}
	nc.used = time.Now()
	c.mu.Unlock()
	return nc.ready(ctx)
}

// listObjects LISTs a resource in a namespace and reads each item.
func listObjects(ctx context.Context, c *Cluster, gvr schema.GroupVersionResource, namespace string, o metav1.ListOptions, read readObject) (*objectList, error) {
	path, err := resourcePath(gvr, namespace, "")
	if err != nil {
		return nil, err
	}
	raw, err := body(c.client.Get().AbsPath(path...).VersionedParams(&o, metav1.ParameterCodec).Do(ctx))
	if err != nil {
		return nil, err
	}
	var l servedList
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("reading the list of %s: %w", gvr.Resource, err)
	}
	out := &objectList{ListMeta: l.Metadata, Items: make([]runtime.Object, 0, len(l.Items))}
	for _, item := range l.Items {
		obj, err := read(item)
		if err != nil {
			return nil, fmt.Errorf("reading the list of %s: %w", gvr.Resource, err)
		}
		out.Items = append(out.Items, obj)
	}
	return out, nil
}

// objectDecoder reads a watch stream of objects with read.
type objectDecoder struct {
	body   io.ReadCloser
	frames *Frames
	read   readObject
}

func (d *objectDecoder) Decode() (watch.EventType, runtime.Object, error) {
	frame, err := d.frames.Next()
	if err != nil {
		return "", nil, err
	}
	var ev struct {
		Type   watch.EventType `json:"type"`
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(frame, &ev); err != nil {
		return "", nil, fmt.Errorf("reading a watch event: %w", err)
	}
	if ev.Type == watch.Error {
		status := &metav1.Status{}
		if err := json.Unmarshal(ev.Object, status); err != nil {
			return "", nil, fmt.Errorf("reading a watch error: %w", err)
		}
		return ev.Type, status, nil
	}
	obj, err := d.read(ev.Object)
	if err != nil {
		return "", nil, fmt.Errorf("reading a watch event: %w", err)
	}
	return ev.Type, obj, nil
}

func (d *objectDecoder) Close() { d.body.Close() }

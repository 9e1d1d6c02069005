package kube

import (
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/gatewayapi-ssa/rollouts-plugin/routes"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

// A watch stream as the apiserver sends it (JSON events one after another),
// read by the watch caches' decoder: each event comes out as the informer
// needs it, however the stream is cut into reads.
func TestWatchStreamDecodesEveryEvent(t *testing.T) {
	served := string(jsonOf(t, servedRoute()))
	want, err := routes.Decode([]byte(served))
	if err != nil {
		t.Fatal(err)
	}
	unreadable := strings.Replace(served, `"rules":[`, `"rules":["not an object",`, 1)
	// A value with braces, brackets and escaped quotes in a string must not
	// end an object early.
	tricky := strings.Replace(served, `"app":"web"`, `"app":"we}]b\"{["`, 1)
	stream := `{"type":"ADDED","object":` + served + "}\n" +
		` {"type":"MODIFIED","object":` + tricky + "}\n\n" +
		`{"type":"MODIFIED","object":` + unreadable + "}\n" +
		`{"type":"BOOKMARK","object":{"kind":"HTTPRoute","apiVersion":"gateway.networking.k8s.io/v1","metadata":{"resourceVersion":"500","annotations":{"k8s.io/initial-events-end":"true"}}}}` + "\n" +
		`{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (2)","reason":"Expired","code":410}}` + "\n" +
		`{"type":"DELETED","object":` + served + "}\n"

	for name, r := range map[string]func(io.Reader) io.Reader{
		"whole":        func(r io.Reader) io.Reader { return r },
		"byte by byte": iotest.OneByteReader,
		"half reads":   iotest.HalfReader,
	} {
		t.Run(name, func(t *testing.T) {
			d := &eventDecoder{body: io.NopCloser(nil), frames: routes.NewFrames(r(strings.NewReader(stream)))}
			next := func(wantType watch.EventType) any {
				t.Helper()
				typ, obj, err := d.Decode()
				if err != nil {
					t.Fatalf("%s: %v", wantType, err)
				}
				if typ != wantType {
					t.Fatalf("event %s, want %s", typ, wantType)
				}
				return obj
			}
			if diff := cmp.Diff(want, next(watch.Added).(*cachedRoute).route); diff != "" {
				t.Errorf("ADDED (-Decode +event):\n%s", diff)
			}
			if got := next(watch.Modified).(*cachedRoute).route.Labels["app"]; got != `we}]b"{[` {
				t.Errorf("the label with braces and quotes read as %q", got)
			}
			bad := next(watch.Modified).(*cachedRoute)
			if bad.err == nil || bad.Name != "web" || bad.ResourceVersion != "7" {
				t.Errorf("an unreadable route: kept as %s at %s with error %v", bad.Name, bad.ResourceVersion, bad.err)
			}
			bookmark := next(watch.Bookmark).(*cachedRoute)
			if bookmark.ResourceVersion != "500" || bookmark.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
				t.Errorf("bookmark %+v", bookmark.ObjectMeta)
			}
			if st := next(watch.Error).(*metav1.Status); st.Code != 410 || st.Reason != metav1.StatusReasonExpired {
				t.Errorf("error event %+v", st)
			}
			if diff := cmp.Diff(want, next(watch.Deleted).(*cachedRoute).route); diff != "" {
				t.Errorf("DELETED (-Decode +event):\n%s", diff)
			}
			if _, _, err := d.Decode(); err != io.EOF {
				t.Errorf("after the last event: %v, want EOF", err)
			}
		})
	}
}

// A stream cut inside an event, or holding something other than objects,
// is an error, not an event.
func TestWatchStreamRefusesWhatIsNotAnEvent(t *testing.T) {
	for name, stream := range map[string]string{
		"cut inside an event": `{"type":"ADDED","object":{"kind":"HTTPRoute"`,
		"not an object":       `["ADDED"]`,
		"an unknown type":     `{"type":"SOMETHING","object":{}}`,
	} {
		d := &eventDecoder{body: io.NopCloser(nil), frames: routes.NewFrames(strings.NewReader(stream))}
		if typ, obj, err := d.Decode(); err == nil || err == io.EOF {
			t.Errorf("%s: %s %T, %v; want an error", name, typ, obj, err)
		}
	}
}
